"""Optional reranking of result items (off unless a reranker is configured)."""

import logging

from django.conf import settings

log = logging.getLogger(__name__)


def rerank_items(query: str, items: list[dict], *, enabled: bool | None = None) -> list[dict]:
    """Reorder items by the configured reranker's scores, dropping those under RERANK_MIN_SCORE."""
    from retrieval.rerankers import reranker

    model = reranker()
    if model is None or not items or enabled is False:
        return items
    texts = [item.get("atomic_fact") or item.get("summary") or item.get("text") or "" for item in items]
    try:
        scores = model.rerank(query, texts)
    except Exception as exc:  # a reranker outage degrades ranking, it must not fail the search
        log.warning("reranking failed, keeping fused order: %s", exc)
        return items
    for item, score in zip(items, scores):
        item["scores"]["rerank"] = round(float(score), 6)
        item["score"] = round(float(score), 6)
    kept = [it for it in items if it["scores"]["rerank"] >= settings.RERANK_MIN_SCORE]
    return sorted(kept, key=lambda it: it["score"], reverse=True)
