"""The one search code path behind the API, the console, MCP and `manage.py search`.

Where each part lives:
- `engines`  — the engine calls: leaf tasks with deadlines, joined in the request thread;
- `flat`     — the keyword and vector methods;
- `hybrid`   — the five mRAG stages, each a function named for it (the expander: `mrag`);
- `scoring`  — how hybrid scores an episode, a fact and its relevance: the whole formula, then its terms;
- `response` — hydrating ranked candidates into the response shape, each scored by its calibrated relevance;
- `ranking`  — the relevance floor and the one merged order (`rank`) over facts, episodes and chunks;
- `agentic`  — agentic search, over `Run.hybrid`.
"""

import time
from dataclasses import dataclass, replace

from django.conf import settings

from common import metrics, tracing
from common.dates import resolve_relative_dates
from retrieval import results, warmup
from retrieval.search.agentic import agentic_search
from retrieval.backends.base import IndexFilter
from retrieval.request import ANY_AGENT, SearchError, SearchRequest, index_conditions
from retrieval.reranking import rerank_items
from retrieval.search import coverage, flat, hybrid, late_interaction, multilingual, paths, ranking
from retrieval.search.agent_memory import EVERY_AGENT_NOTE, agent_memory_items, every_agent
from retrieval.search.engines import EngineError, Engines, cpu_budget
from retrieval.search.memory_kinds import add_profiles_and_foresight
from retrieval.search.participants import prefer_participant
from retrieval.search.tense import apply_tense
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

    def hybrid(self) -> dict:
        return hybrid.search(self.scope, self.req, self.base, self.engines)

    def keyword(self) -> dict:
        return flat.keyword(self.scope, self.req, self.base, self.engines)

    def vector(self) -> dict:
        return flat.vector(self.scope, self.req, self.base, self.engines)

    def paths(self) -> dict:
        return paths.search(self.scope, self.req, self.base, self.engines)


@metrics.timed_search
def search(scope: Scope, req: SearchRequest) -> dict:
    with tracing.span("search", {"loci.search.method": req.method, "loci.search.top_k": req.limit,
                                 "loci.tenant": scope.tenant.slug}):
        return _search(scope, req)


def _search(scope: Scope, req: SearchRequest) -> dict:
    # A process still loading its model and index partitions (or not yet started: a script, a shell)
    # does it here, before any engine deadline starts.
    with tracing.span("search.warmup"):
        warmup.start()
        warmup.wait()
    started = time.perf_counter()
    asked = req.query
    if req.reference_time is not None:  # "last Thursday" searched as the day it names, as the facts state it
        req = replace(req, query=resolve_relative_dates(req.query, req.reference_time)[0])
    limit = req.limit
    covered_weight = settings.SEARCH_COVERED_WEIGHT if req.method in ("hybrid", "agentic") else 1.0
    if late_interaction.applies(req.query, req.method) or covered_weight < 1.0:
        # The stages reorder a wider candidate list: what hybrid scored anyway, appended after its top_k
        # (asking hybrid for more items instead widens its recall and expansion: p95 3.24x at 10k).
        req = replace(req, candidates=late_interaction.candidates(limit))
    with cpu_budget(settings.SEARCH_CPU_BUDGET_SECONDS) as budget:
        run = Run.start(scope, req)
        notes = []
        with tracing.span("search.retrieve"):
            if req.method == "agentic":
                response, notes = agentic_search(run)
                # Agentic once the model's verdict is in, even when round 2 missed the deadline (a note says so).
                method_used = "agentic" if "agentic" in response else "hybrid"
            else:
                response, method_used = getattr(run, req.method)(), req.method
        if late_interaction.applies(req.query, method_used):
            with tracing.span("search.late_interaction"):
                late_interaction.rescore(req.query, response)
                coverage.spread_facts(response, settings.MRAG_FACTS_PER_MESSAGE)  # the stage re-sorted them
        if multilingual.applies(method_used):  # Chinese and cross-language items, before the floor reads them
            with tracing.span("search.multilingual"):
                multilingual.rescore(req.query, response)
        coverage.demote_covered(response, covered_weight)
        for key in ranking.LISTS:  # back to what was asked for
            if key in response:
                response[key] = response[key][:limit]
        # The other kinds join before the floor and the ranks: one relevance, one order for every kind.
        with tracing.span("search.memory_kinds"):
            add_profiles_and_foresight(run, response)  # profiles[], and foresight into facts when asked for
            response["agent_memory"] = agent_memory_items(run)  # agent cases and skills
        if every_agent(req):
            notes = [*notes, EVERY_AGENT_NOTE]
    cpu_seconds = budget.used()
    # The floor is hybrid's (and agentic's, which answers with hybrid's lists): keyword answers what
    # matches a term and vector keeps VECTOR_MIN_SIMILARITY, since a short English query's relevant
    # cosine is lower than CMRC's, which the map was fitted on (bench/RESULTS.md, "One relevance").
    floor = settings.MRAG_MIN_RELEVANCE if req.method in ("hybrid", "agentic") else 0.0
    below = ranking.drop_below(response, floor)
    weak = not any(response.get(key) for key in ranking.LISTS)
    if weak and below["dropped"]:
        notes = [*notes, f"Nothing answers this well: the best of {below['dropped']} results has relevance "
                         f"{below['best']:.3f}, under the floor {floor:g} (MRAG_MIN_RELEVANCE)."]
    if req.rerank or (req.rerank is None and settings.MRAG_RERANK):  # stage 5, for every method
        with tracing.span("search.rerank"):
            for key in ("facts", "episodes", "chunks"):
                response[key] = rerank_items(req.query, response.get(key, []))
    apply_tense(run, response)  # "now" puts the current value first, "used to" brings back the old one
    if req.expand_context:
        with tracing.span("search.context"):
            results.add_context(response["facts"] + response["episodes"])
    if req.neighbours:
        with tracing.span("search.neighbours"):
            results.add_neighbours(response["facts"] + response["episodes"] + response.get("chunks", []),
                                   req.neighbours)
    if req.filters.get("participant"):
        prefer_participant(response, req.filters["participant"])
    ranking.assign_ranks(response)
    response["raw_messages"] = results.raw_messages(scope, run.base.kb_ids, req.filters)
    response["query"] = {
        "text": asked,
        "method": req.method,
        "answered_by": method_used,
        "filters_applied": {"tenant": scope.tenant.slug, "kb": sorted(_slugs(run.base.kb_ids)), **{
            k: v for k, v in req.filters.items() if k != "kb"}, "memory_types": req.memory_types},
        "llm": bool(settings.LLM_ENABLED),
        "notes": notes,
        "weak": weak,
        "min_relevance": floor,
        "below_floor": below["dropped"],
        "took_ms": round((time.perf_counter() - started) * 1000, 1),
        "cpu_ms": round(cpu_seconds * 1000, 1),
    }
    if req.query != asked:
        response["query"]["searched_as"] = req.query
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
