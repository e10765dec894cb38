"""The late-interaction stage: hybrid's English candidates rescored by ColBERT MaxSim.

Hybrid is asked for SEARCH_LATE_INTERACTION_CANDIDATES items (or the request's top_k if more); each
English item (fact, episode, chunk) of an English query gets its MaxSim against the query
(retrieval/colbert.py) from the token vectors stored at ingestion (retrieval/token_vectors.py; an
item without stored vectors of the current model is encoded now, so a model change or a row not
yet projected never leaves a hole), and a new calibrated relevance:

    P(relevant) = σ(a · logit(hybrid's relevance) + b · MaxSim + c)      (a, b, c: SEARCH_LATE_INTERACTION_MAP)

fitted by logistic regression on LoCoMo dev conversations (bench/rank_stages.py; bench/RESULTS.md,
"Late interaction and a local cross-encoder"). It is monotone in hybrid's relevance, so it orders
as hybrid + (b/a)·MaxSim, and it stays a probability, so the floor and the merged order read it
as before. Chinese or mixed text (query or item) keeps hybrid's relevance: the model is English.
Each list is then cut back to the request's top_k.
"""

import logging
import math

from django.conf import settings

from retrieval import token_vectors
from retrieval.relevance import logit, platt, script
from retrieval.search.ranking import LISTS

log = logging.getLogger(__name__)

KEY_OF = {"facts": "memory", "episodes": "memory", "chunks": "chunk"}


def applies(query: str, method: str) -> bool:
    return bool(settings.SEARCH_LATE_INTERACTION) and method in ("hybrid", "agentic") and script(query) == "latin"


def candidates(limit: int) -> int:
    """How many items hybrid is asked for when the stage runs."""
    return max(limit, settings.SEARCH_LATE_INTERACTION_CANDIDATES)


def text_of(item: dict) -> str:
    return item.get("atomic_fact") or item.get("summary") or item.get("text") or ""


def relevance(hybrid: float, maxsim: float) -> float:
    a, b, c = settings.SEARCH_LATE_INTERACTION_MAP
    return platt(a * logit(hybrid) + b * maxsim, 1.0, c)


def rescore(query: str, response: dict, limit: int) -> None:
    """Rescore the English items of `response` in place, re-sort each list and cut it to `limit`.

    A model that cannot run (its package missing, a file not the pinned one) degrades the search to
    hybrid's own scores with a warning, as a reranker outage does: it must not fail the search."""
    english = [(key, item) for key in LISTS for item in response.get(key, []) if script(text_of(item)) == "latin"]
    try:
        _score(query, english)
    except Exception as exc:
        log.warning("late interaction failed, keeping hybrid's relevance: %s", exc)
        for _, item in english:
            item["score"] = item["scores"].pop("hybrid_relevance", item["score"])
            item["scores"].pop("late_interaction", None)
    for key in LISTS:
        if key in response:
            response[key] = sorted(response[key], key=lambda it: it["score"], reverse=True)[:limit]


def _score(query: str, english: list[tuple[str, dict]]) -> None:
    from retrieval import colbert

    if english:
        model = token_vectors.model()
        ids = [f"{KEY_OF[key]}:{item['id']}" for key, item in english]
        stored = token_vectors.load(ids, model.name)
        missing = [i for i, row_id in enumerate(ids) if row_id not in stored]
        made = model.encode_documents([text_of(english[i][1]) for i in missing]) if missing else []
        fresh = dict(zip((ids[i] for i in missing), made))
        query_vectors = model.encode_query(query)
        for row_id, (_, item) in zip(ids, english):
            matrix = stored.get(row_id)
            score = colbert.maxsim(query_vectors, matrix if matrix is not None else colbert.quantise(fresh[row_id]))
            hybrid = item["score"]
            item["scores"]["hybrid_relevance"] = hybrid
            item["scores"]["late_interaction"] = round(score, 6)
            item["score"] = round(relevance(hybrid, score), 6) if math.isfinite(score) else hybrid
