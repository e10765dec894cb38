"""The response shape of a search (shared/DESIGN.md): ranked candidates hydrated into items.

Only what is shown is loaded from the database, in one query per kind. Each item's `score` is its
calibrated relevance (search/scoring.py's `relevance`); the method's own scores stay in `scores`.
"""

from retrieval import results
from retrieval.search.scoring import relevance

NESTED_FACTS = 3  # an episode no fact displaced shows its best few facts as supporting detail


def mrag(scope, ranked, expander) -> dict:
    """Hybrid's output: facts and the episodes no fact displaced, each episode with its best facts nested."""
    nested_ids = [f.id for c in ranked if c.kind == "episode" and expander
                  for f in expander.expanded.get(c.id, [])[:NESTED_FACTS]]
    memories = results.load_memories(scope, [c.id for c in ranked] + nested_ids)
    episodes, facts = [], []
    for c in ranked:
        memory = memories.get(c.id)
        if memory is None:
            continue
        if c.kind == "atomic_fact":
            facts.append(results.fact_item(memory, relevance("mrag", c.score), c.scores))
        else:
            scored = expander.expanded.get(c.id, []) if expander else []
            nested = [results.fact_item(memories[f.id], relevance("mrag", f.score), f.scores)
                      for f in scored[:NESTED_FACTS] if f.id in memories]
            episodes.append(results.episode_item(memory, relevance("mrag", c.score), c.scores, nested))
    return {"episodes": episodes, "facts": facts}


def chunks(scope, candidates, *, expand_context: bool) -> list[dict]:
    loaded = results.load_chunks(scope, [c.id for c in candidates])
    return [results.chunk_item(loaded[c.id], relevance("chunk", c.score), c.scores, expand_context=expand_context)
            for c in candidates if c.id in loaded]


def flat(scope, scored: list[tuple[str, float, dict]], *, expand_context: bool) -> dict:
    """Non-mRAG methods: episode hits with their fact hits nested, chunk hits apart; facts stays empty.

    `scored` is (id, relevance, scores), best first.
    A fact whose episode was not itself a hit is shown under that episode, marked `via_fact`.
    """
    memories = results.load_memories(scope, [i for i, _, _ in scored])
    loaded_chunks = results.load_chunks(scope, [i for i, _, _ in scored])
    chunk_items, own_hits, nested, order = [], {}, {}, {}
    for item_id, score, scores in scored:
        if item_id in loaded_chunks:
            chunk_items.append(results.chunk_item(loaded_chunks[item_id], score, scores, expand_context=expand_context))
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
    holders = results.load_memories(scope, [k for k in order if k not in own_hits])
    episodes = []
    for key, first_score in order.items():
        memory, score, scores = own_hits.get(key) or (holders.get(key), first_score, {"via_fact": True})
        if memory is not None:
            episodes.append(results.episode_item(memory, score, scores, nested.get(key, [])))
    return {"episodes": episodes, "facts": [], "chunks": chunk_items}
