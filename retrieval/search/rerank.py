"""Optional reranking of result items (off unless a reranker is configured)."""

import logging

from django.conf import settings

from retrieval.search.pipeline import RESULTS, Found, When

log = logging.getLogger(__name__)


def rerank_items(query: str, items: list[dict], *, enabled: bool | None = None) -> list[dict]:
    """Reordered copies of items, scored by the configured reranker, those under RERANK_MIN_SCORE dropped.

    Copies: the caller's items keep their own scores (agentic merges round 1's with round 2's hybrid
    scores; a reranker's, on another scale, would win every comparison)."""
    from retrieval.runtimes.rerankers import reranker

    model = reranker()
    if model is None or not items or enabled is False:
        return items
    texts = [item.get("atomic_fact") or item.get("summary") or item.get("text") or "" for item in items]
    try:
        scores = model.rerank(query, texts)
    except Exception as exc:  # a reranker outage degrades ranking, it must not fail the search
        log.warning("reranking failed, keeping fused order: %s", exc)
        return items
    rescored = [{**item, "score": round(float(score), 6), "scores": {**item["scores"], "rerank": round(float(score), 6)}}
                for item, score in zip(items, scores)]
    kept = [it for it in rescored if it["scores"]["rerank"] >= settings.RERANK_MIN_SCORE]
    return sorted(kept, key=lambda it: it["score"], reverse=True)


class Rerank:
    name = "rerank"
    help = "the configured reranker's score replaces the relevance (MRAG_RERANK or the request's rerank)"
    reads = ("req", *RESULTS)
    writes = RESULTS
    applies = When(asks="rerank", default="MRAG_RERANK")

    def run(self, found: Found) -> None:
        for key in RESULTS:
            found.response[key] = rerank_items(found.req.query, found.response.get(key, []))
