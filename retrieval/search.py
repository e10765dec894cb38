"""The one search code path behind the API, the console and `manage.py search`."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from django.conf import settings

from retrieval import results
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import Hit, IndexFilter
from retrieval.embeddings import embedder
from retrieval.fusion import logistic_relevance, rrf
from retrieval.mrag import Candidate, EpisodeExpander, MragParams
from retrieval.request import SearchError, SearchRequest
from retrieval.reranking import rerank_items
from tenants.access import Scope
from tenants.models import KnowledgeBase, Tenant

# Engine calls of one search run in parallel (dense and BM25); two threads match the two
# engines, and a shared pool avoids paying thread start-up on every query.
_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="search")  # calls nest (fused → bm25): keep headroom
ALL_ABOVE_FLOOR = 16384  # Milvus' largest limit: top_k=-1 for vector search
NESTED_FACTS = 3  # an episode no fact displaced shows its best few facts as supporting detail


def search(scope: Scope, req: SearchRequest) -> dict:
    started = time.perf_counter()
    kb_ids = _kb_ids(scope, req)
    base = IndexFilter(
        tenant_id=scope.tenant.pk,
        kb_ids=kb_ids,
        exclusive=scope.tenant.isolation == Tenant.Isolation.EXCLUSIVE,
        document_ids=tuple(req.filters.get("document_id", ())),
        user_id=req.filters.get("user_id"),
        session_id=req.filters.get("session_id"),
    )
    run = Run(scope, req, base)
    method = req.method
    notes = []
    if method == "agentic":
        from retrieval.agentic import agentic_search

        response, notes = agentic_search(run)
        method_used = "agentic" if not notes else "hybrid"
    elif method == "hybrid":
        response, method_used = run.hybrid(), "hybrid"
    else:
        response, method_used = run.flat(method), method
    if req.rerank or (req.rerank is None and settings.MRAG_RERANK):
        for key in ("facts", "episodes", "chunks"):
            response[key] = rerank_items(req.query, response.get(key, []))
    if req.expand_context:
        results.add_context(response["facts"] + response["episodes"])
    if req.neighbours:
        results.add_neighbours(response["facts"] + response["episodes"] + response.get("chunks", []), req.neighbours)
    response["profiles"] = []
    response["raw_messages"] = results.raw_messages(scope, kb_ids, req.filters)
    response["query"] = {
        "text": req.query,
        "method": req.method,
        "answered_by": method_used,
        "filters_applied": {"tenant": scope.tenant.slug, "kb": sorted(_slugs(kb_ids)), **{
            k: v for k, v in req.filters.items() if k != "kb"}, "memory_types": req.memory_types},
        "llm": bool(settings.LLM_ENABLED),
        "notes": notes,
        "took_ms": round((time.perf_counter() - started) * 1000, 1),
    }
    return response


def _rrf_order(dense: list[Hit], sparse: list[Hit]) -> dict[str, float]:
    return rrf([[h.id for h in dense], [h.id for h in sparse]], k=settings.MRAG_RRF_K)


def _best(order: dict[str, float], limit: int) -> list[str]:
    """The `limit` ids of highest RRF score, best first."""
    return sorted(order, key=order.get, reverse=True)[:limit]


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


class Run:
    """One search: the query's embedding is computed once and shared by every stage."""

    def __init__(self, scope: Scope, req: SearchRequest, base: IndexFilter):
        self.scope, self.req, self.base = scope, req, base
        self._qvec = None
        self._qvec_lock = threading.Lock()
        self._prefetched: dict[IndexFilter, tuple[set, tuple[list[Hit], list[Hit]]]] = {}

    @property
    def qvec(self):
        with self._qvec_lock:  # the threads of one search wait for one embedding instead of each making one
            if self._qvec is None:
                self._qvec = [float(x) for x in embedder().embed_query(self.req.query)]
        return self._qvec

    def with_query(self, query: str) -> "Run":
        return Run(self.scope, replace(self.req, query=query), self.base)

    # --- engine calls
    def dense(self, flt: IndexFilter, limit: int, floor: float | None = None) -> list[Hit]:
        hits = self._from_prefetched(flt, 0)
        if hits is not None:
            return [h for h in hits if floor is None or h.score >= floor][:limit]
        return vector_index().search(self.qvec, flt, limit, min_score=floor)

    def bm25(self, flt: IndexFilter, limit: int) -> list[Hit]:
        hits = self._from_prefetched(flt, 1)
        if hits is not None:
            return hits[:limit]
        return keyword_index().search(self.req.query, flt, limit)

    def _from_prefetched(self, flt: IndexFilter, engine: int) -> list[Hit] | None:
        """A call for ids that `prefetch_recalled` scored, with the same filter otherwise, answered from its result."""
        asked, hits = self._prefetched.get(replace(flt, ids=()), (set(), None))
        if not flt.ids or not asked.issuperset(flt.ids):
            return None
        # A subset of an engine's answer in its order: each hit's score does not depend on which
        # other ids were asked (exact cosine; BM25 with corpus-wide statistics).
        wanted = set(flt.ids)
        return [h for h in hits[engine] if h.id in wanted]

    def both(self, flt: IndexFilter, limit: int) -> tuple[list[Hit], list[Hit]]:
        bm25_future = _POOL.submit(self.bm25, flt, limit)
        dense = self.dense(flt, limit)
        return dense, bm25_future.result()

    def fused(self, flt: IndexFilter, limit: int, hits: tuple[list[Hit], list[Hit]] | None = None) -> list[Candidate]:
        """Dense + BM25 in parallel (or `hits`, their result), RRF order, logistic-regression relevance as the score."""
        dense, sparse = hits or self.both(flt, limit)
        cos = {h.id: h.score for h in dense}
        bm25 = {h.id: h.score for h in sparse}
        missing = [i for i in bm25 if i not in cos]
        if missing:  # exact cosine for BM25-only hits, in one filtered engine call
            for h in self.dense(replace(flt, ids=tuple(missing)), len(missing), floor=-1.0):
                cos[h.id] = h.score
        order = _rrf_order(dense, sparse)
        ranked = _best(order, limit)
        candidates = []
        for item_id in ranked:
            c, b = cos.get(item_id, 0.0), bm25.get(item_id, 0.0)
            score = logistic_relevance(c, b, settings.MRAG_LR_W_COS, settings.MRAG_LR_W_BM25, settings.MRAG_LR_BIAS)
            candidates.append(Candidate(item_id, "", score, scores={"cosine": c, "bm25": b, "rrf": order[item_id],
                                                                     "fused": score}))
        if settings.MRAG_FUSION == "lr":
            candidates.sort(key=lambda x: x.score, reverse=True)
        return candidates

    # --- methods
    def flat(self, method: str) -> dict:
        kinds = tuple(t for t in self.req.memory_types if t in ("episode", "atomic_fact", "chunk"))
        flt = replace(self.base, kinds=kinds)
        if method == "keyword":
            hits = self.bm25(flt, self.req.limit)
            scored = [(h.id, h.score, {"bm25": h.score}) for h in hits]
        else:
            limit = ALL_ABOVE_FLOOR if self.req.top_k == -1 else self.req.limit
            hits = self.dense(flt, limit, floor=settings.VECTOR_MIN_SIMILARITY)
            scored = [(h.id, h.score, {"cosine": h.score}) for h in hits]
        return self.assemble_flat(scored)

    def hybrid(self) -> dict:
        req, p = self.req, settings
        want_facts = "atomic_fact" in req.memory_types
        want_episodes = "episode" in req.memory_types or want_facts
        response = {"episodes": [], "facts": [], "chunks": []}
        chunk_future = None
        if "chunk" in req.memory_types:
            chunk_future = _POOL.submit(self.fused, replace(self.base, kinds=("chunk",)), req.limit)
        if want_episodes:
            n_episodes = min(p.MRAG_EPISODE_MULTIPLIER * req.limit, p.MRAG_MAX_EPISODES)
            # No embedding up front: each `both` starts its BM25 call before its dense one, so BM25
            # runs while the query is embedded (once: the dense calls wait for one another).
            episode_flt, fact_hits = replace(self.base, kinds=("episode",)), None
            if want_facts and p.MRAG_FACT_RECALL:  # runs beside the episode recall
                fact_hits = _POOL.submit(self.both, replace(self.base, kinds=("atomic_fact",)), n_episodes)
            hits = self.both(episode_flt, n_episodes)
            facts_of_recalled = None
            if fact_hits is not None:
                fact_hits = fact_hits.result()
                facts_of_recalled = self.prefetch_recalled(episode_flt, n_episodes, hits, fact_hits)
            episodes = self.fused(episode_flt, n_episodes, hits)
            if fact_hits is not None:
                episodes += self.episodes_of_facts(episodes, *fact_hits)
            for e in episodes:
                e.kind = "episode"
            if want_facts:
                params = MragParams(top_n=req.limit, alpha=p.MRAG_ALPHA, facts_per_episode=p.MRAG_FACTS_PER_EPISODE,
                                    facts_competing=p.MRAG_FACTS_COMPETING, batch_size=p.MRAG_BATCH_SIZE,
                                    patience=p.MRAG_CONVERGENCE_ROUNDS)
                expander = EpisodeExpander(params, self.fact_scorer(episodes, facts_of_recalled))
                ranked = expander.run(episodes)
                if "episode" not in req.memory_types:
                    ranked = [c for c in ranked if c.kind == "atomic_fact"]
            else:
                expander, ranked = None, episodes[: req.limit]
            response.update(self.assemble_mrag(ranked, expander))
        if chunk_future is not None:
            chunks = chunk_future.result()
            loaded = results.load_chunks(self.scope, [c.id for c in chunks])
            response["chunks"] = [results.chunk_item(loaded[c.id], c.score, c.scores, expand_context=req.expand_context)
                                  for c in chunks if c.id in loaded]
        return response

    def prefetch_recalled(self, episode_flt: IndexFilter, limit: int, hits, fact_hits) -> tuple[list[Hit], list[Hit]]:
        """Everything the expansion will ask the engines after the recall, in one call per engine.

        The recalled episodes are known before they are scored (RRF ranks, it does not score), and
        so are the parents of the recalled facts. One call per engine scores the facts of all of them
        (stage 3) and the episodes themselves that a recall list left unscored (cosines of BM25-only
        hits, both scores of the facts' parents); `fused` and `episodes_of_facts` then read the
        latter from the prefetch table, and the facts are returned for `fact_scorer`. On Milvus Lite,
        which serves one search at a time, that is one search fewer in a row (≈ 15 ms at 100k rows).
        """
        dense, sparse = hits
        recalled = _best(_rrf_order(dense, sparse), limit)
        parents = list(dict.fromkeys(h.extra["parent_id"] for h in (*fact_hits[0], *fact_hits[1])
                                     if h.extra.get("parent_id")))
        in_dense = {h.id for h in dense}
        unscored = [h.id for h in sparse if h.id not in in_dense] + parents
        flt = replace(episode_flt, kinds=("episode", "atomic_fact"),
                      parent_ids=tuple(dict.fromkeys(recalled + parents)), or_ids=tuple(dict.fromkeys(unscored)))
        both = self.both(flt, ALL_ABOVE_FLOOR)  # a parent filter is scored exactly
        episodes, facts = ([[h for h in engine if h.extra.get("kind") == kind] for engine in both]
                           for kind in ("episode", "atomic_fact"))
        if unscored:
            self._prefetched[episode_flt] = (set(unscored), tuple(episodes))
        return facts[0], facts[1]

    def episodes_of_facts(self, recalled: list[Candidate], dense: list[Hit], sparse: list[Hit]) -> list[Candidate]:
        """Episodes whose summary missed the question but one of whose facts (`dense`, `sparse` hits) matches it.

        A summary keeps a few central sentences; a question about a detail matches a fact, so the
        parents of the best-matching facts join the coarse recall, scored as episodes themselves."""
        known = {e.id for e in recalled}
        parents = list(dict.fromkeys(h.extra.get("parent_id") for h in (*dense, *sparse)
                                     if h.extra.get("parent_id") and h.extra.get("parent_id") not in known))
        if not parents:
            return []
        return self.fused(replace(self.base, kinds=("episode",), ids=tuple(parents)), len(parents))

    def fact_scorer(self, episodes: list[Candidate], hits: tuple[list[Hit], list[Hit]] | None = None):
        """Stage 3's scorer. Every fact of the recalled episodes is scored against the query up front,
        in one dense and one BM25 call (both filtered to those episodes), or taken from `hits` (their
        result, from `prefetch_recalled`), so each expansion round reads a table instead of querying
        the engines again. Fact score = logistic(cosine, BM25) with the facts' own weights
        (MRAG_FACT_*): a sentence scores differently from a summary."""
        if hits is None:
            flt = replace(self.base, kinds=("atomic_fact",), parent_ids=tuple(e.id for e in episodes))
            bm25_future = _POOL.submit(self.bm25, flt, ALL_ABOVE_FLOOR)
            hits = self.dense(flt, ALL_ABOVE_FLOOR, floor=-1.0), bm25_future.result()  # a parent filter: exact
        dense, bm25 = hits[0], {h.id: h.score for h in hits[1]}
        table: dict[str, list[Candidate]] = {}
        for hit in dense:
            parent = hit.extra.get("parent_id")
            if not parent:
                continue
            b = bm25.get(hit.id, 0.0)
            score = logistic_relevance(hit.score, b, settings.MRAG_FACT_W_COS, settings.MRAG_FACT_W_BM25,
                                       settings.MRAG_FACT_BIAS)
            table.setdefault(parent, []).append(
                Candidate(hit.id, "atomic_fact", score, parent, {"cosine": hit.score, "bm25": b, "fused": score}))
        return lambda episode_ids: {e: table.get(e, []) for e in episode_ids}

    # --- response assembly
    def assemble_mrag(self, ranked: list[Candidate], expander) -> dict:
        # Hydrate only what is shown: the ranked items and the nested facts of surviving episodes.
        nested_ids = [f.id for c in ranked if c.kind == "episode" and expander
                      for f in expander.expanded.get(c.id, [])[:NESTED_FACTS]]
        memories = results.load_memories(self.scope, [c.id for c in ranked] + nested_ids)
        episodes, facts = [], []
        for c in ranked:
            memory = memories.get(c.id)
            if memory is None:
                continue
            if c.kind == "atomic_fact":
                facts.append(results.fact_item(memory, c.score, c.scores))
            else:
                scored = expander.expanded.get(c.id, []) if expander else []
                nested = [results.fact_item(memories[f.id], f.score, f.scores) for f in scored[:NESTED_FACTS]
                          if f.id in memories]
                episodes.append(results.episode_item(memory, c.score, c.scores, nested))
        return {"episodes": episodes, "facts": facts}

    def assemble_flat(self, scored: list[tuple[str, float, dict]]) -> dict:
        """Non-mRAG methods: episode hits with their fact hits nested, chunk hits apart; facts stays empty.

        A fact whose episode was not itself a hit is shown under that episode, marked `via_fact`.
        """
        memories = results.load_memories(self.scope, [i for i, _, _ in scored])
        chunks = results.load_chunks(self.scope, [i for i, _, _ in scored])
        chunk_items, own_hits, nested, order = [], {}, {}, {}
        for item_id, score, scores in scored:
            if item_id in chunks:
                chunk_items.append(results.chunk_item(chunks[item_id], score, scores,
                                                      expand_context=self.req.expand_context))
                continue
            memory = memories.get(item_id)
            if memory is None:
                continue
            if memory.kind == "atomic_fact" and memory.parent_id:
                key = f"memory:{memory.parent_id}"
                nested.setdefault(key, []).append(results.fact_item(memory, score, scores))
            else:
                key = item_id
                own_hits[key] = (memory, score, scores)
            order.setdefault(key, score)  # the first (best) hit places the episode
        holders = results.load_memories(self.scope, [k for k in order if k not in own_hits])
        episodes = []
        for key, first_score in order.items():
            memory, score, scores = own_hits.get(key) or (holders.get(key), first_score, {"via_fact": True})
            if memory is not None:
                episodes.append(results.episode_item(memory, score, scores, nested.get(key, [])))
        return {"episodes": episodes, "facts": [], "chunks": chunk_items}
