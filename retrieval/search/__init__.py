"""The one search code path behind the API, the console, MCP and `manage.py search`.

Where each part lives:
- `engines`  — the engine calls: leaf tasks with deadlines, joined in the request thread;
- `flat`     — the keyword and vector methods;
- `hybrid`   — the five mRAG stages, each a function named for it (the expander: `mrag`);
- `scoring`  — how hybrid scores an episode, a fact and its relevance: the whole formula, then its terms;
- `response` — hydrating ranked candidates into the response shape, each scored by its calibrated relevance;
- `ranking`  — the relevance floor and the one merged order (`rank`) over facts, episodes and chunks;
- `agentic`  — agentic search, over `Run.hybrid`;
- `toc`      — the `navigate` method: the best sections of the documents' tables of contents, then their chunks;
- `pipeline` — how a search runs: stages declared with what they read and write, run in order, each
  leaving its step in the results' `trail`; `stages` — the stages themselves, in their one order.
"""

import time
from dataclasses import dataclass, replace

from django.conf import settings

from common import metrics, tracing
from common.dates import resolve_relative_dates
from retrieval import warmup
from retrieval.backends.base import IndexFilter
from retrieval.request import ANY_AGENT, SearchError, SearchRequest, index_conditions
from retrieval.search import flat, hybrid, late_interaction, paths, stages, toc
from retrieval.search.engines import EngineError, Engines, cpu_budget
from retrieval.search.pipeline import Found, run_stages
from tenants.access import Scope
from tenants.models import KnowledgeBase, Tenant

__all__ = ["EngineError", "Run", "SearchError", "search"]


@dataclass
class Run:
    """One search: the caller's scope, the request, its permission filter and its engine calls."""

    scope: Scope
    req: SearchRequest
    base: IndexFilter
    engines: Engines

    @classmethod
    def start(cls, scope: Scope, req: SearchRequest) -> "Run":
        return cls(scope, req, permission_filter(scope, req), Engines(req.query))

    def with_query(self, query: str) -> "Run":
        return Run(self.scope, replace(self.req, query=query), self.base, self.engines.with_query(query))

    def with_bridge(self, bridge: str) -> "Run":
        """This search with the query's bridged words searched by its keyword calls (retrieval.search.query_bridge)."""
        return replace(self, engines=self.engines.with_bridge(bridge))

    def hybrid(self) -> dict:
        return hybrid.search(self.scope, self.req, self.base, self.engines)

    def keyword(self) -> dict:
        return flat.keyword(self.scope, self.req, self.base, self.engines)

    def vector(self) -> dict:
        return flat.vector(self.scope, self.req, self.base, self.engines)

    def paths(self) -> dict:
        return paths.search(self.scope, self.req, self.base, self.engines)

    def navigate(self) -> dict:
        return toc.search(self.scope, self.req, self.base, self.engines)


@metrics.timed_search
def search(scope: Scope, req: SearchRequest, *, observe=None) -> dict:
    """The response to `req` in `scope`; `observe(stage, found, "before" | "after")` watches each stage run."""
    with tracing.span("search", {"loci.search.method": req.method, "loci.search.top_k": req.limit,
                                 "loci.tenant": scope.tenant.slug}):
        return _search(scope, req, observe=observe)


def _search(scope: Scope, req: SearchRequest, *, observe=None) -> dict:
    # A process still loading its model and index partitions (or not yet started: a script, a shell)
    # does it here, before any engine deadline starts.
    with tracing.span("search.warmup"):
        warmup.start()
        warmup.wait()
    started = time.perf_counter()
    asked, limit = req.query, req.limit
    if req.reference_time is not None:  # "last Thursday" searched as the day it names, as the facts state it
        req = replace(req, query=resolve_relative_dates(req.query, req.reference_time)[0])
    covered_weight = settings.SEARCH_COVERED_WEIGHT if req.method in ("hybrid", "agentic") else 1.0
    if late_interaction.applies(req.query, req.method) or covered_weight < 1.0:
        # The stages reorder a wider candidate list: what hybrid scored anyway, appended after its top_k
        # (asking hybrid for more items instead widens its recall and expansion: p95 3.24x at 10k).
        req = replace(req, candidates=late_interaction.candidates(limit))
    with cpu_budget(settings.SEARCH_CPU_BUDGET_SECONDS) as budget:
        found = Found(Run.start(scope, req), req, asked, limit)
        run_stages(stages.RETRIEVAL, found, observe=observe)
    found.cpu_seconds = budget.used()
    run_stages(stages.FINISHING, found, observe=observe)
    return _with_query_block(found, started)


def _with_query_block(found: Found, started: float) -> dict:
    """The response with `query`: what was searched, how, by which method, within what, and its notes."""
    req, run, response = found.req, found.run, found.response
    response["query"] = {
        "text": found.asked,
        "method": req.method,
        "answered_by": found.method_used,
        "filters_applied": {"tenant": run.scope.tenant.slug, "kb": sorted(_slugs(run.base.kb_ids)), **{
            k: v for k, v in req.filters.items() if k != "kb"}, "memory_types": req.memory_types},
        "llm": bool(settings.LLM_ENABLED),
        "notes": found.notes,
        "weak": found.weak,
        "min_relevance": found.floor,
        "below_floor": found.below["dropped"],
        "took_ms": round((time.perf_counter() - started) * 1000, 1),
        "cpu_ms": round(found.cpu_seconds * 1000, 1),
    }
    if req.query != found.asked:
        response["query"]["searched_as"] = req.query
    if found.bridged:
        response["query"]["keyword_bridge"] = found.bridged
    return response


def permission_filter(scope: Scope, req: SearchRequest) -> IndexFilter:
    """The caller's tenant and readable KBs, and the request's filters, as the filter every engine call carries."""
    return IndexFilter(
        tenant_id=scope.tenant.pk,
        kb_ids=_kb_ids(scope, req),
        exclusive=scope.tenant.isolation == Tenant.Isolation.EXCLUSIVE,
        document_ids=tuple(req.filters.get("document_id", ())),
        user_id=req.filters.get("user_id"),
        session_id=req.filters.get("session_id"),
        # No agent named: memories of no agent only; "*": every agent's (see retrieval.request.ANY_AGENT).
        agent_id=None if req.filters.get("agent_id") == ANY_AGENT else req.filters.get("agent_id", ""),
        group_id=req.filters.get("group_id"),
        run_id=req.filters.get("run_id"),
        metadata=index_conditions(req.filters.get("metadata", {})),
    )


def _kb_ids(scope: Scope, req: SearchRequest) -> tuple[int, ...]:
    if "kb" not in req.filters:
        return tuple(sorted(scope.kb_ids))
    found = dict(KnowledgeBase.objects.filter(tenant=scope.tenant, slug__in=req.filters["kb"],
                                              id__in=scope.kb_ids).values_list("slug", "id"))
    missing = [s for s in req.filters["kb"] if s not in found]
    if missing:
        raise SearchError(f"Unknown knowledge base(s): {', '.join(missing)}.")
    return tuple(sorted(found.values()))


def _slugs(kb_ids):
    return KnowledgeBase.objects.filter(id__in=kb_ids).values_list("slug", flat=True)
