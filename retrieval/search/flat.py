"""The single-engine methods: `keyword` (BM25) and `vector` (cosine above a floor)."""

from dataclasses import replace

from django.conf import settings

from retrieval.backends.base import IndexFilter
from retrieval.request import SearchRequest
from retrieval.search import response
from retrieval.search.engines import Engines
from retrieval.search.hybrid import ALL_ABOVE_FLOOR


def keyword(scope, req: SearchRequest, base: IndexFilter, engines: Engines) -> dict:
    hits = engines.bm25(_filter(req, base), req.limit)
    return response.flat(scope, [(h.id, h.score, {"bm25": h.score}) for h in hits], expand_context=req.expand_context)


def vector(scope, req: SearchRequest, base: IndexFilter, engines: Engines) -> dict:
    limit = ALL_ABOVE_FLOOR if req.top_k == -1 else req.limit
    hits = engines.dense(_filter(req, base), limit, floor=settings.VECTOR_MIN_SIMILARITY)
    return response.flat(scope, [(h.id, h.score, {"cosine": h.score}) for h in hits], expand_context=req.expand_context)


def _filter(req: SearchRequest, base: IndexFilter) -> IndexFilter:
    return replace(base, kinds=tuple(t for t in req.memory_types if t in ("episode", "atomic_fact", "chunk")))
