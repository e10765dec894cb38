"""The single-engine methods: `keyword` (BM25) and `vector` (cosine above a floor)."""

from dataclasses import replace

from django.conf import settings

from retrieval.backends.base import IndexFilter
from retrieval.relevance import calibrated
from retrieval.request import SearchRequest
from retrieval import results
from retrieval.search.engines import Engines
from retrieval.search.hybrid import ALL_ABOVE_FLOOR, CosineShifts

# Hits read per hit returned when the cross-language shift may reorder them: with 3, bench.crosslang's
# Chinese questions reached no English item at all (the Chinese passages fill the top 30 by raw cosine).
CROSS_LANGUAGE_OVERFETCH = 10


def keyword(scope, req: SearchRequest, base: IndexFilter, engines: Engines) -> dict:
    hits = engines.bm25(_filter(req, base), req.limit)
    scored = [(h.id, calibrated("bm25", h.score), {"bm25": h.score}) for h in hits]
    return results.flat_response(scope, scored, expand_context=req.expand_context)


def vector(scope, req: SearchRequest, base: IndexFilter, engines: Engines) -> dict:
    """Cosine hits; one in the other script than the query's is scored with the cross-language shift
    (retrieval.relevance), so the order is by relevance, not by raw cosine. With the shift on, more
    hits than asked are read: an item of the other script may stand below the top_k by raw cosine."""
    shifting = settings.SEARCH_CROSS_LANGUAGE_COSINE_SHIFT > 0
    limit = ALL_ABOVE_FLOOR if req.top_k == -1 else req.limit * (CROSS_LANGUAGE_OVERFETCH if shifting else 1)
    hits = engines.dense(_filter(req, base), limit, floor=settings.VECTOR_MIN_SIMILARITY)
    shifts = CosineShifts(req.query)
    shifts.learn(hits)
    shift = shifts([h.id for h in hits])
    scored = []
    for h in hits:
        scores = {"cosine": h.score, **({"cross_language": shift[h.id]} if h.id in shift else {})}
        scored.append((h.id, calibrated("cosine", h.score + shift.get(h.id, 0.0)), scores))
    scored.sort(key=lambda s: s[1], reverse=True)  # stable: one script keeps the engine's order
    return results.flat_response(scope, scored[: len(hits) if req.top_k == -1 else req.limit],
                         expand_context=req.expand_context)


def _filter(req: SearchRequest, base: IndexFilter) -> IndexFilter:
    # Only other kinds asked for (profile, agent_case…: their own lists): a kind no row has, not "any kind".
    kinds = tuple(t for t in req.memory_types if t in ("episode", "atomic_fact", "chunk", "summary"))
    return replace(base, kinds=kinds or ("-",))
