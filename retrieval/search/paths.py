"""Evidence paths across sessions: the `paths` method (issue 28; the seed's M-flow bundle search).

A multi-hop or open-domain question's answer is spread over several sessions, and no single
memory matches it well. This method searches a small graph of the caller's memories instead:

- anchors at every level, found by vector and keyword: facts and episodes by dense + BM25 (each
  scored by the facts' logistic relevance), and the facts naming an entity of the query (the
  entity channel's lookup, entities/lookup.py);
- an anchor costs 1 - its relevance; costs propagate along edges, each with its own cost:
  entity → a fact naming it, fact → its episode, episode → the previous and next episode of the
  same user (a story told over consecutive sessions);
- an episode costs its best path; a direct summary hit pays DIRECT_SUMMARY_PENALTY on top, since a
  summary matches many questions loosely and a fact says what was said;
- the bundles returned are the cheapest episodes (score 1 - cost), each with the facts on its paths.

The edge costs are set by hand, not fitted (bench/RESULTS.md compares the method with hybrid on
LoCoMo); hybrid stays the default.
"""

from dataclasses import replace


from memory.models import Memory
from retrieval.backends.base import Hit, IndexFilter
from retrieval.search.scoring import fact_score
from retrieval.request import SearchRequest
from retrieval import results
from retrieval.search.engines import Engines
from retrieval.search.hybrid import entity_recall

ANCHORS = 40  # facts and episodes anchored per level (at least 3 × top_k)
EDGE_FACT_EPISODE = 0.05  # a fact's episode is nearly as good as the fact: it holds the fact's context
EDGE_NEXT_EPISODE = 0.25  # the session before or after: often the rest of the story, often not
ENTITY_FACT_COST = 0.45  # a fact that only names the query's entity: weaker than a fair text match
DIRECT_SUMMARY_PENALTY = 0.10
FACTS_PER_BUNDLE = 3
MAX_EPISODES_SCANNED = 5000  # for the next-episode edges: episodes of the anchored users, in time order


def search(scope, req: SearchRequest, base: IndexFilter, engines: Engines) -> dict:
    n = max(ANCHORS, 3 * req.limit)
    fact_flt, episode_flt = replace(base, kinds=("atomic_fact",)), replace(base, kinds=("episode",))
    engines.start_embedding()
    calls = {flt.kinds[0]: (engines.start_dense(flt, n), engines.start_bm25(flt, n)) for flt in (fact_flt, episode_flt)}
    found = entity_recall(req.query, base)  # a database query, while the engines answer
    fact_cost = _anchor_costs(engines, fact_flt, *(engines.result(c) for c in calls["atomic_fact"]))
    direct = _anchor_costs(engines, episode_flt, *(engines.result(c) for c in calls["episode"]))
    via = {"fact": {}, "entity": {}}
    for fact_id, score in (found.facts.items() if found else ()):
        cost = ENTITY_FACT_COST + (1.0 - score) * (1.0 - ENTITY_FACT_COST)
        if cost < fact_cost.get(fact_id, 2.0):
            fact_cost[fact_id] = cost
            via["entity"][fact_id] = True

    parents = _parents(list(fact_cost))
    episode_cost = {e: c + DIRECT_SUMMARY_PENALTY for e, c in direct.items()}
    facts_of: dict[str, list[str]] = {}
    for fact_id, cost in fact_cost.items():
        episode = parents.get(fact_id)
        if episode is None:
            continue
        facts_of.setdefault(episode, []).append(fact_id)
        episode_cost[episode] = min(episode_cost.get(episode, 2.0), cost + EDGE_FACT_EPISODE)
    for episode, neighbour in _neighbour_pairs(base, list(episode_cost)):
        step = episode_cost[episode] + EDGE_NEXT_EPISODE
        if step < episode_cost.get(neighbour, 2.0):
            episode_cost[neighbour] = step

    best = sorted(episode_cost, key=lambda e: (episode_cost[e], e))[: req.limit]
    scored = []
    for episode in best:
        scored.append((episode, _score(episode_cost[episode]), {"path_cost": round(episode_cost[episode], 4),
                                                                "direct": episode in direct}))
        for fact_id in sorted(facts_of.get(episode, []), key=lambda f: fact_cost[f])[:FACTS_PER_BUNDLE]:
            scored.append((fact_id, _score(fact_cost[fact_id]), {"path_cost": round(fact_cost[fact_id], 4),
                                                                 "entity": fact_id in via["entity"]}))
    scored.sort(key=lambda s: s[1], reverse=True)
    return results.flat_response(scope, scored, expand_context=req.expand_context)


def _anchor_costs(engines: Engines, flt: IndexFilter, dense: list[Hit], sparse: list[Hit]) -> dict[str, float]:
    cos = {h.id: h.score for h in dense}
    missing = [h.id for h in sparse if h.id not in cos]
    if missing:  # exact cosines for the keyword-only anchors
        cos.update({h.id: h.score for h in engines.dense(replace(flt, ids=tuple(missing)), len(missing), floor=-1.0)})
    bm25 = {h.id: h.score for h in sparse}
    return {i: 1.0 - fact_score(cos.get(i, 0.0), bm25.get(i, 0.0)) for i in {*cos, *bm25}}


def _parents(fact_ids: list[str]) -> dict[str, str]:
    pks = [i.split(":", 1)[1] for i in fact_ids]
    rows = Memory.objects.filter(pk__in=pks, parent_id__isnull=False).values_list("pk", "parent_id")
    return {f"memory:{pk}": f"memory:{parent}" for pk, parent in rows}


def _neighbour_pairs(base: IndexFilter, episode_ids: list[str]) -> list[tuple[str, str]]:
    """(episode, the previous or next episode of the same user and KB), for each anchored episode."""
    pks = [i.split(":", 1)[1] for i in episode_ids]
    anchored = list(Memory.objects.filter(pk__in=pks, tenant_id=base.tenant_id, kb_id__in=base.kb_ids)
                    .exclude(user_id="").values_list("pk", "user_id"))
    users = {u for _, u in anchored}
    if not users:
        return []
    timeline = Memory.objects.filter(tenant_id=base.tenant_id, kb_id__in=base.kb_ids, kind=Memory.Kind.EPISODE,
                                     status=Memory.Status.ACTIVE, user_id__in=users)
    if base.session_id:
        timeline = timeline.filter(session_id=base.session_id)
    ordered: dict[str, list[str]] = {}
    for pk, user in timeline.order_by("user_id", "occurred_at", "created_at").values_list(
            "pk", "user_id")[:MAX_EPISODES_SCANNED]:
        ordered.setdefault(user, []).append(f"memory:{pk}")
    place = {e: (u, i) for u, episodes in ordered.items() for i, e in enumerate(episodes)}
    pairs = []
    for pk, _user in anchored:
        key = f"memory:{pk}"
        if key not in place:
            continue
        user, i = place[key]
        pairs += [(key, ordered[user][j]) for j in (i - 1, i + 1) if 0 <= j < len(ordered[user])]
    return pairs


def _score(cost: float) -> float:
    return max(0.0, min(1.0, 1.0 - cost))
