"""Hybrid search: the five mRAG stages of DESIGN.md, each found here by its name.

1. `coarse_recall` — episodes by dense and BM25 together (and, beside them, facts and chunks),
   fused by `fuse` (scored by search/scoring.py, which holds the whole formula); `episodes_of_facts` adds the episodes whose facts matched the question, and
   the entity channel (`entity_recall`, below) those whose facts name an entity of the question, and
   the ColBERT channel (search/colbert_channel.py) those citing the messages nearest to it by MaxSim.
2.–4. `expand` — retrieval.search.mrag.EpisodeExpander: the two heaps, batched expansion of episodes into
   their facts (scored by `fact_scorer`), the output order; then scoring's re-weightings.
5. rerank — optional, in retrieval.search.search (shared by every method).

Every engine call goes through `Engines`: started as a leaf, joined here, in the request thread.
"""

import functools
from dataclasses import dataclass, replace

from django.conf import settings
from django.db.models import Q
from django.db.models.functions import Substr

from entities.lookup import EntityRecall, recall as lookup_entities
from memory.models import Memory
from retrieval import results
from retrieval.backends.base import Hit, IndexFilter
from retrieval.search.mrag import Candidate, EpisodeExpander, MragParams, expanded
from retrieval.projection import memory_key
from retrieval.relevance import CROSSING, PROBE_CHARS, cosine_shift, script
from retrieval.request import SearchRequest
from retrieval.search import questions as candidate_questions
from retrieval.search import scoring
from retrieval.search.engines import Engines
from retrieval.search import colbert_channel
from retrieval.search.colbert_channel import ChannelRecall, channel_episodes

ALL_ABOVE_FLOOR = 16384  # Milvus' largest limit: top_k=-1 for vector search, and "every row of a filter"

Hits = tuple[list[Hit], list[Hit]]  # (dense, BM25)


class CosineShifts:
    """The cross-language cosine shift of each item (retrieval.relevance), its script learnt once.

    A hit of an index that stores each row's script (IndexRow.script: the embedded vector index)
    says it in `extra`, learnt by `learn`; for any other item the first characters of its text are
    read from the database, one query per batch of ids. With the shift set to 0 nothing is read."""

    def __init__(self, query: str, query_script: str = ""):
        self.query_script = query_script or script(query)
        self._known: dict[str, float] = {}
        self.labelled = False  # a hit said its script: the index stores them, no text is read ahead

    def learn(self, *hit_lists) -> None:
        """Take the scripts the hits carry (an index row written before IndexRow.script has none)."""
        if not self.active:
            return
        shift = settings.SEARCH_CROSS_LANGUAGE_COSINE_SHIFT
        for hits in hit_lists:
            for h in hits:
                item_script = h.extra.get("script")
                if item_script and h.id not in self._known:
                    self._known[h.id] = shift if (self.query_script, item_script) in CROSSING else 0.0
                    self.labelled = True

    @property
    def active(self) -> bool:
        # A query in mixed scripts is across languages from no text (cosine_shift is 0 for all).
        return bool(settings.SEARCH_CROSS_LANGUAGE_COSINE_SHIFT) and self.query_script != "mixed"

    def __call__(self, ids) -> dict[str, float]:
        if not self.active:
            return {}
        missing = [i for i in dict.fromkeys(ids) if i not in self._known]
        if missing:
            self._learn(results.texts(missing), missing)
        return {i: self._known[i] for i in ids if self._known.get(i)}

    def preload(self, episode_ids) -> None:
        """Read the texts of these episodes and of all their facts in one query, ahead of need.

        Hybrid calls it while the prefetch's engine calls run (the request thread would only wait),
        for the episodes and facts that stages 1 and 3 will shift; an id the engines return that
        this read missed is read by `__call__` as before."""
        if not self.active or self.labelled:
            return
        pks = [i.split(":", 1)[1] for i in dict.fromkeys(episode_ids) if i.startswith("memory:")]
        if not pks:
            return
        rows = (Memory.objects.filter(Q(pk__in=pks) | Q(parent_id__in=pks))
                .values_list("pk", Substr("text", 1, PROBE_CHARS)))
        texts = {memory_key(pk): text for pk, text in rows}
        self._learn(texts, [i for i in texts if i not in self._known])

    def _learn(self, texts: dict[str, str], ids) -> None:
        self._known.update({i: cosine_shift(self.query_script, texts.get(i, "")) for i in ids})


class _NoShifts:
    """No shift for any item (callers that score one language: bench.fit_fusion)."""

    def __call__(self, ids) -> dict[str, float]:
        return {}

    def learn(self, *hit_lists) -> None:
        pass


NO_SHIFTS = _NoShifts()


def search(scope, req: SearchRequest, base: IndexFilter, engines: Engines) -> dict:
    want_facts = "atomic_fact" in req.memory_types
    want_episodes = "episode" in req.memory_types or want_facts or "summary" in req.memory_types
    out = {"episodes": [], "facts": [], "chunks": []}
    shifts = CosineShifts(req.query, engines.script)
    recall = coarse_recall(req, base, engines, want_episodes=want_episodes, want_facts=want_facts)
    chunks = None
    if recall.chunks is not None:  # its missing cosines run beside the episode stages' calls
        chunks = start_fuse(engines, replace(base, kinds=("chunk",)), req.limit, recall.chunks, shifts)
    if want_episodes:
        episode_flt = replace(base, kinds=episode_kinds(req))
        facts_of_recalled = None
        if recall.facts is not None:
            facts_of_recalled = prefetch_recalled(engines, episode_flt, recall.n_episodes, recall.episodes, recall.facts,
                                                  entity_episodes(recall.entities) + (
                                                      [] if recall.colbert is None else channel_episodes(recall.colbert)),
                                                  shifts)
        episodes = fuse(engines, episode_flt, recall.n_episodes, recall.episodes, shifts)
        if recall.facts is not None:
            episodes += episodes_of_facts(engines, base, episodes, *recall.facts, shifts=shifts)
        if recall.colbert is not None:  # before the entity channel's, whose boost then reads them too
            episodes += colbert_channel.pulled_in(functools.partial(fuse, shifts=shifts), engines, base, episodes,
                                                  recall.colbert)
        if recall.entities is not None:
            pulled = pulled_in(functools.partial(fuse, shifts=shifts), engines, base, episodes, recall.entities)
            episodes = scoring.boosted(episodes + pulled, recall.entities.episodes)
        for e in episodes:
            e.kind = "episode"  # a summary node too: the response tells them apart by the memory's kind
        if want_facts:
            score_facts = fact_scorer(engines, base, episodes, facts_of_recalled, shifts)
            if recall.entities is not None:  # each fact that names an entity of the query
                for facts in score_facts.values():
                    scoring.boosted(facts, recall.entities.facts)
            expander, ranked = expand(_mrag_params(req), score_facts, episodes, keep_episodes=keeps_episodes(req))
            if req.candidates > len(ranked):  # a rescoring stage reads more: what the expansion scored
                ranked += runners_up(ranked, episodes, expander, req.candidates - len(ranked),
                                     keep_episodes=keeps_episodes(req))
            if recall.colbert is not None and req.candidates > req.limit:  # read by the rescoring stages
                ranked += colbert_channel.rescored_facts(recall.colbert, ranked, episodes, score_facts,
                                                         settings.MRAG_ALPHA)
            if settings.MRAG_ASSISTANT_FACT_WEIGHT < 1.0:
                ranked = scoring.weigh_assistant_facts(scope, ranked, expander, settings.MRAG_ASSISTANT_FACT_WEIGHT)
            if settings.MRAG_FACTS_PER_MESSAGE:
                ranked = scoring.spread_over_messages(scope, ranked, expander, settings.MRAG_FACTS_PER_MESSAGE)
        else:
            expander, ranked = None, episodes[: req.limit]
        out.update(results.mrag_response(scope, ranked, expander))
    if chunks is not None:
        out["chunks"] = results.chunks_response(scope, chunks(), expand_context=req.expand_context)
    return out


# --- summary-tree nodes (retrieval/summary_tree) join the episode lists
# A node is a narrative over several episodes, so it competes with episodes, scored by the same fused
# recall; it has no facts, so the expansion leaves it as it is, and the response shows it among the
# episodes marked `memory_type: "summary"` with its level and leaves. Asked for by name (memory_types
# "summary", alone or beside "episode"), or by every hybrid search that reads episodes when
# SUMMARY_TREE_IN_HYBRID is on.

def episode_kinds(req: SearchRequest) -> tuple[str, ...]:
    """The index kinds hybrid's episode recall reads for this request."""
    asked = "summary" in req.memory_types
    if asked and not ({"episode", "atomic_fact"} & set(req.memory_types)):
        return ("summary",)
    if asked or settings.SUMMARY_TREE_IN_HYBRID:
        return ("episode", "summary")
    return ("episode",)


def keeps_episodes(req: SearchRequest) -> bool:
    """Whether the expansion keeps episodes (and so nodes) no fact displaced."""
    return "episode" in req.memory_types or "summary" in req.memory_types


# --- stage 1: coarse recall

@dataclass
class Recall:
    n_episodes: int
    episodes: Hits | None
    facts: Hits | None  # the fact recall beside the episodes' (MRAG_FACT_RECALL)
    chunks: Hits | None
    entities: EntityRecall | None = None  # the third channel: memories naming the query's entities
    colbert: ChannelRecall | None = None  # the fourth: messages nearest by ColBERT MaxSim (SEARCH_COLBERT_CHANNEL)


def coarse_recall(req: SearchRequest, base: IndexFilter, engines: Engines, *, want_episodes: bool,
                  want_facts: bool) -> Recall:
    """Every recall list's dense and BM25 calls started together, then joined.

    The BM25 calls start first and run while the query is embedded (once, for every dense call)."""
    p = settings
    n_episodes = min(p.MRAG_EPISODE_MULTIPLIER * req.limit, p.MRAG_MAX_EPISODES)
    plan = {}
    if "chunk" in req.memory_types:
        plan["chunks"] = (replace(base, kinds=("chunk",)), req.limit)
    if want_episodes:
        if want_facts and p.MRAG_FACT_RECALL:
            plan["facts"] = (replace(base, kinds=("atomic_fact",)), n_episodes)
        plan["episodes"] = (replace(base, kinds=episode_kinds(req)), n_episodes)
    started = engines.start_all(plan)
    lifted = [plan[key][1] for key in ("chunks", "facts") if key in plan]
    matched = (candidate_questions.start(engines, base, 2 * max(lifted))  # several questions per source
               if lifted and settings.CANDIDATE_QUESTIONS and candidate_questions.active(engines) else None)
    entities = entity_recall(req.query, base) if want_episodes else None  # while the engines answer
    colbert = (colbert_channel.channel_recall(req.query, base)
               if want_episodes and settings.SEARCH_COLBERT_CHANNEL else None)
    joined = engines.join_all(started)
    if matched is not None:
        candidate_questions.lift(joined, matched)
    return Recall(n_episodes, joined.get("episodes"), joined.get("facts"), joined.get("chunks"), entities, colbert)


def rrf_order(dense: list[Hit], sparse: list[Hit]) -> dict[str, float]:
    return scoring.rrf([[h.id for h in dense], [h.id for h in sparse]], k=settings.MRAG_RRF_K)


def best(order: dict[str, float], limit: int) -> list[str]:
    """The `limit` ids of highest RRF score, best first."""
    return sorted(order, key=order.get, reverse=True)[:limit]


def start_fuse(engines: Engines, flt: IndexFilter, limit: int, hits: Hits | None = None, shifts=NO_SHIFTS):
    """Start what `fuse` needs from the engines; returns the function that finishes it."""
    dense, sparse = hits or engines.both(flt, limit)
    cos = {h.id: h.score for h in dense}
    missing = [h.id for h in sparse if h.id not in cos]
    # Exact cosines for BM25-only hits, in one filtered engine call.
    call = engines.start_dense(replace(flt, ids=tuple(missing)), len(missing), floor=-1.0) if missing else []
    return lambda: _fused(dense, sparse, engines.result(call), limit, shifts)


def fuse(engines: Engines, flt: IndexFilter, limit: int, hits: Hits | None = None,
         shifts=NO_SHIFTS) -> list[Candidate]:
    """Dense + BM25 (or `hits`, their result), RRF order, logistic-regression relevance as the score."""
    return start_fuse(engines, flt, limit, hits, shifts)()


def _fused(dense: list[Hit], sparse: list[Hit], cosines_of_missing: list[Hit], limit: int,
           shifts=NO_SHIFTS) -> list[Candidate]:
    cos = {h.id: h.score for h in dense}
    bm25 = {h.id: h.score for h in sparse}
    for h in cosines_of_missing:
        cos[h.id] = h.score
    order = rrf_order(dense, sparse)
    candidates = []
    chosen = best(order, limit)
    shifts.learn(dense, sparse, cosines_of_missing)
    shift = shifts(chosen)
    for item_id in chosen:
        c, b = cos.get(item_id, 0.0), bm25.get(item_id, 0.0)
        score = scoring.episode_score(c + shift.get(item_id, 0.0), b)
        scores = {"cosine": c, "bm25": b, "rrf": order[item_id], "fused": score}
        if item_id in shift:
            scores["cross_language"] = shift[item_id]
        candidates.append(Candidate(item_id, "", score, scores=scores))
    if settings.MRAG_FUSION == "lr":
        candidates.sort(key=lambda x: x.score, reverse=True)
    return candidates


def prefetch_recalled(engines: Engines, episode_flt: IndexFilter, limit: int, hits: Hits, fact_hits: Hits,
                      more_parents: list[str] = (), shifts: CosineShifts | None = None) -> Hits:
    """Everything the expansion will ask the engines after the recall, in one call per engine.

    The recalled episodes are known before they are scored (RRF ranks, it does not score), and
    so are the parents of the recalled facts. One call per engine scores the facts of all of them
    (stage 3) and the episodes themselves that a recall list left unscored (cosines of BM25-only
    hits, both scores of the facts' parents and of `more_parents`, the entity channel's episodes);
    `fuse`, `episodes_of_facts` and the entity channel then read the latter from the prefetch
    table, and the facts are returned for `fact_scorer`. On Milvus Lite,
    which serves one search at a time, that is one search fewer in a row (≈ 15 ms at 100k rows).
    While the engines answer, `shifts` reads the texts of those episodes and their facts, unless the
    index told their scripts (then the prefetch's hits tell the facts').
    """
    dense, sparse = hits
    recalled = best(rrf_order(dense, sparse), limit)
    parents = list(dict.fromkeys([*(h.extra["parent_id"] for h in (*fact_hits[0], *fact_hits[1])
                                    if h.extra.get("parent_id")), *more_parents]))
    in_dense = {h.id for h in dense}
    unscored = [h.id for h in sparse if h.id not in in_dense] + parents
    flt = replace(episode_flt, kinds=(*episode_flt.kinds, "atomic_fact"),  # and summary nodes, when read
                  parent_ids=tuple(dict.fromkeys(recalled + parents)), or_ids=tuple(dict.fromkeys(unscored)))
    started = engines.start_both(flt, ALL_ABOVE_FLOOR)  # a parent filter is scored exactly
    if shifts is not None:
        shifts.learn(dense, sparse, *fact_hits)  # where the index says scripts, nothing is read ahead
        shifts.preload(flt.parent_ids)
    both = engines.join_prefetching(started, episode_flt, set(unscored), "episode")
    return tuple([h for h in engine if h.extra.get("kind") == "atomic_fact"] for engine in both)


def episodes_of_facts(engines: Engines, base: IndexFilter, recalled: list[Candidate], dense: list[Hit],
                      sparse: list[Hit], shifts=NO_SHIFTS) -> list[Candidate]:
    """Episodes whose summary missed the question but one of whose facts (`dense`, `sparse` hits) matches it.

    A summary keeps a few central sentences; a question about a detail matches a fact, so the
    parents of the best-matching facts join the coarse recall, scored as episodes themselves."""
    known = {e.id for e in recalled}
    parents = list(dict.fromkeys(h.extra.get("parent_id") for h in (*dense, *sparse)
                                 if h.extra.get("parent_id") and h.extra.get("parent_id") not in known))
    if not parents:
        return []
    return fuse(engines, replace(base, kinds=("episode",), ids=tuple(parents)), len(parents), shifts=shifts)


# --- stages 2–4: expansion

def _mrag_params(req: SearchRequest) -> MragParams:
    p = settings
    return MragParams(top_n=req.limit, alpha=p.MRAG_ALPHA, facts_per_episode=p.MRAG_FACTS_PER_EPISODE,
                      facts_competing=p.MRAG_FACTS_COMPETING, batch_size=p.MRAG_BATCH_SIZE,
                      patience=p.MRAG_CONVERGENCE_ROUNDS)


def expand(params: MragParams, score_facts, episodes: list[Candidate], *,
           keep_episodes: bool) -> tuple[EpisodeExpander, list[Candidate]]:
    expander, ranked = expanded(params, score_facts, episodes)
    return expander, ranked if keep_episodes else [c for c in ranked if c.kind == "atomic_fact"]


def runners_up(ranked: list[Candidate], episodes: list[Candidate], expander: EpisodeExpander, count: int,
               *, keep_episodes: bool) -> list[Candidate]:
    """The next `count` candidates after `ranked`, from what recall and expansion already scored: the
    competing facts of the expanded episodes and the recalled episodes, best first, under the
    expansion's own rule (an episode one of whose facts is listed gives way to it). What a larger
    top_n would have kept of the same pool, without recalling and expanding more episodes; a stage
    that reorders them (late interaction, coverage) reads a wider list at no engine cost."""
    listed = {c.id for c in ranked}
    shown = {c.id for c in ranked if c.kind == "episode"}  # a listed episode stands for its facts (nested)
    displaced = {c.parent_id for c in ranked if c.kind == "atomic_fact"}
    competing = expander.params.facts_competing
    pool = [f for finals in expander.expanded.values() for f in finals[:competing] if f.id not in listed]
    if keep_episodes:
        pool += [e for e in episodes if e.id not in listed and e.id not in displaced]
    out: list[Candidate] = []
    for c in sorted(pool, key=lambda c: c.score, reverse=True):
        if len(out) >= count:
            break
        if c.id in listed or c.parent_id in shown:
            continue
        if c.kind == "atomic_fact":
            if c.parent_id not in displaced:
                out = [o for o in out if o.id != c.parent_id]  # its episode gives way
                displaced.add(c.parent_id)
        elif c.id in displaced:
            continue
        out.append(c)
        listed.add(c.id)
    return out


def fact_scorer(engines: Engines, base: IndexFilter, episodes: list[Candidate], hits: Hits | None = None,
                shifts=NO_SHIFTS):
    """Stage 3's table: every fact of the recalled episodes scored against the query up front, in one
    dense and one BM25 call (both filtered to those episodes), or taken from `hits` (their result,
    from `prefetch_recalled`), so each expansion round reads the table instead of querying the
    engines again. Each fact's score is `scoring.fact_score`; episode id -> its facts."""
    if hits is None:
        flt = replace(base, kinds=("atomic_fact",), parent_ids=tuple(e.id for e in episodes))
        started = engines.start_all({"facts": (flt, ALL_ABOVE_FLOOR)}, floor=-1.0)  # a parent filter: exact
        hits = engines.join_all(started)["facts"]
    dense, bm25 = hits[0], {h.id: h.score for h in hits[1]}
    shifts.learn(dense)
    shift = shifts([h.id for h in dense if h.extra.get("parent_id")])
    table: dict[str, list[Candidate]] = {}
    for hit in dense:
        parent = hit.extra.get("parent_id")
        if not parent:
            continue
        b = bm25.get(hit.id, 0.0)
        score = scoring.fact_score(hit.score + shift.get(hit.id, 0.0), b)
        scores = {"cosine": hit.score, "bm25": b, "fused": score}
        if hit.id in shift:
            scores["cross_language"] = shift[hit.id]
        table.setdefault(parent, []).append(Candidate(hit.id, "atomic_fact", score, parent, scores))
    return table


# --- the entity channel: the entities a query names (entities/lookup.py)
# Stage 1 gains the episodes of the facts that name an entity of the query (scored by dense and BM25
# like every recalled episode); every recalled episode and scored fact that names one gains
# MRAG_ENTITY_WEIGHT times its entity score (scoring.boosted), shown as `scores["entity"]`.

def entity_recall(query: str, base: IndexFilter) -> EntityRecall | None:
    """The channel's lookup (a database query in the request thread), or None when it is switched off."""
    return lookup_entities(query, base) if settings.MRAG_ENTITY_RECALL else None


def entity_episodes(found: EntityRecall | None) -> list[str]:
    """The channel's best episodes, at most MRAG_ENTITY_EPISODES: known before the recall is joined,
    so the prefetch scores them (and their facts) in the same engine calls as the other episodes."""
    if found is None:
        return []
    return sorted(found.episodes, key=lambda i: (-found.episodes[i], i))[: settings.MRAG_ENTITY_EPISODES]


def pulled_in(fuse, engines, base: IndexFilter, recalled: list[Candidate], found: EntityRecall) -> list[Candidate]:
    """The channel's episodes the other channels missed, fused by `fuse` like the rest."""
    known = {e.id for e in recalled}
    new = [i for i in entity_episodes(found) if i not in known]
    return fuse(engines, replace(base, kinds=("episode",), ids=tuple(new)), len(new)) if new else []
