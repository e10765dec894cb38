"""The one search code path behind the API, the console, MCP and `manage.py search`.

Where each part lives:
- `engines`  — the engine calls: leaf tasks with deadlines, joined in the request thread;
- `flat`     — the keyword and vector methods;
- `hybrid`   — the five mRAG stages, each a function named for it (the expander: `mrag`);
- `scoring`  — how hybrid scores an episode, a fact and its relevance: the whole formula, then its terms;
- `agentic`  — agentic search, over `Run.hybrid`;
- `toc`      — the `navigate` method: the best sections of the documents' tables of contents, then their chunks;
- `pipeline` — how a search runs: stages declared with what they read and write, run in order, each
  leaving its step in the results' `trail`; the relevance floor and the one merged order (`rank`) over
  facts, episodes and chunks; each stage is declared in the module that does its work
  (`methods` holds `Run` and the `retrieve` stage), and `order` puts them in their one order.
"""

import time
from dataclasses import replace

from django.conf import settings

from common import metrics, tracing
from common.dates import resolve_relative_dates
from retrieval import warmup
from retrieval.relevance import script
from retrieval.request import SearchError, SearchRequest
from retrieval.search.coverage import Covered
from retrieval.search.engines import EngineError, cpu_budget
from retrieval.search.late_interaction import LateInteraction
from retrieval.search.methods import Run, permission_filter
from retrieval.search.order import FINISHING, RETRIEVAL
from retrieval.search.pipeline import Found, run_stages
from tenants.access import Scope

__all__ = ["EngineError", "Run", "SearchError", "permission_filter", "search"]


@metrics.timed_search
def search(scope: Scope, req: SearchRequest, *, observe=None) -> dict:
    """The response to `req` in `scope`; `observe(stage, found, "before" | "after")` watches each stage run."""
    with tracing.span("search", {"loci.search.method": req.method, "loci.search.top_k": req.limit,
                                 "loci.tenant": scope.tenant.slug}):
        # A process still loading its model and index partitions (or not yet started: a script, a
        # shell) does it here, before any engine deadline starts.
        with tracing.span("search.warmup"):
            warmup.ready()
        return _stages(scope, req, observe)


def _stages(scope: Scope, req: SearchRequest, observe) -> dict:
    started = time.perf_counter()
    asked, limit = req.query, req.limit
    if req.reference_time is not None:  # "last Thursday" searched as the day it names, as the facts state it
        req = replace(req, query=resolve_relative_dates(req.query, req.reference_time)[0])
    found = Found(None, req, asked, limit, script=script(req.query), scope=scope)
    if LateInteraction.applies(found) or Covered.applies(found):
        # The stages reorder a wider candidate list: what hybrid scored anyway, appended after its top_k
        # (asking hybrid for more items instead widens its recall and expansion: p95 3.24x at 10k).
        found.req = req = replace(req, candidates=max(limit, settings.SEARCH_LATE_INTERACTION_CANDIDATES))
    with cpu_budget(settings.SEARCH_CPU_BUDGET_SECONDS) as budget:
        run_stages(RETRIEVAL, found, observe=observe)
    found.cpu_seconds = budget.spent
    run_stages(FINISHING, found, observe=observe)
    return _with_query_block(found, started)


def _with_query_block(found: Found, started: float) -> dict:
    """The response with `query`: what was searched, how, by which method, within what, and its notes."""
    req, run, response = found.req, found.run, found.response
    response["query"] = {
        "text": found.asked,
        "method": req.method,
        "answered_by": found.method_used,
        "filters_applied": {"tenant": run.scope.tenant.slug, "kb": sorted(run.scope.slugs(run.base.kb_ids)), **{
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
