"""The search methods and the stage that runs one: `Run` (one search's scope, request, permission
filter and engine calls, with a method each) and the `retrieve` stage."""

from dataclasses import dataclass, replace

from retrieval.backends.base import IndexFilter
from retrieval.request import ANY_AGENT, SearchError, SearchRequest, index_conditions
from retrieval.search import flat, hybrid, paths, toc
from retrieval.search.agentic import agentic_search
from retrieval.search.engines import Engines
from retrieval.search.pipeline import ALWAYS, Found
from tenants.access import Scope
from tenants.models import KnowledgeBase, Tenant


@dataclass
class Run:
    """One search: the caller's scope, the request, its permission filter and its engine calls."""

    scope: Scope
    req: SearchRequest
    base: IndexFilter
    engines: Engines

    @classmethod
    def start(cls, scope: Scope, req: SearchRequest, *, bridge: str = "", script: str = "") -> "Run":
        """The search of `req` in `scope`; `bridge`: the query's bridged words (retrieval.search.query_bridge),
        searched by its keyword calls; `script`: the query's, when known."""
        return cls(scope, req, permission_filter(scope, req), Engines(req.query, bridge=bridge, script=script))

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

    def navigate(self) -> dict:
        return toc.search(self.scope, self.req, self.base, self.engines)


class Retrieve:
    name = "retrieve"
    help = "the method's engine calls: keyword, vector, hybrid (mRAG), agentic (hybrid + LLM rounds), paths or navigate"
    reads = ("req", "bridged", "script", "scope")
    writes = ("run", "response", "method_used", "notes")  # "response": every list of it, made here
    applies = ALWAYS

    def run(self, found: Found) -> None:
        found.run = Run.start(found.scope, found.req, bridge=found.bridged, script=found.script)
        if found.req.method == "agentic":
            found.response, notes = agentic_search(found.run)
            found.notes = [*found.notes, *notes]
            # Agentic once the model's verdict is in, even when round 2 missed the deadline (a note says so).
            found.method_used = "agentic" if "agentic" in found.response else "hybrid"
        else:
            found.response, found.method_used = getattr(found.run, found.req.method)(), found.req.method


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
        metadata=index_conditions(req.filters["metadata"]) if req.filters.get("metadata") else (),
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
