"""How hybrid scores what it finds, in one place: the formula, then each of its terms.

Stage 1 scores each recalled episode (and chunk), stage 3 each fact of an expanded episode:

    episode   = σ(MRAG_LR_W_COS · (cos + shift) + MRAG_LR_W_BM25 · bm25 + MRAG_LR_BIAS)   `episode_score`
                + MRAG_ENTITY_WEIGHT · entity                                            `boosted`
    fact      = σ(MRAG_FACT_W_COS · (cos + shift) + MRAG_FACT_W_BM25 · bm25 + MRAG_FACT_BIAS) `fact_score`
                + MRAG_ENTITY_WEIGHT · entity                                            `boosted`
    final     = MRAG_ALPHA · fact + (1 − MRAG_ALPHA) · episode                           `blend` (search/mrag.py)
                × MRAG_ASSISTANT_FACT_WEIGHT if said in an assistant's reply             `weigh_assistant_facts`
    relevance = Platt(logit(final); SEARCH_RELEVANCE["mrag"])                            `relevance`

cos: the cosine of the query and the item; shift: SEARCH_CROSS_LANGUAGE_COSINE_SHIFT when BM25
cannot match across the two scripts (retrieval/relevance.py, search/hybrid.py's CosineShifts);
bm25: its BM25 score (0 when only the dense engine found it); entity: 0..1, how strongly it names
an entity of the query (entities/lookup.py, search/hybrid.py's entity channel). A recall list is ordered by
reciprocal rank fusion (`rrf`, MRAG_RRF_K), or by the score when MRAG_FUSION is "lr". After the
final scores: at most MRAG_FACTS_PER_MESSAGE facts of one message (`spread_over_messages`), the
late-interaction stage on English items (search/late_interaction.py), then the floor and one
merged rank over every list (search/pipeline.py). Where each default comes from: loci/search_settings.py.
"""

import math
from dataclasses import replace

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from retrieval import results
from retrieval.relevance import calibrated

# Reciprocal rank fusion constant from Cormack, Clarke & Büttcher (SIGIR 2009), also the
# default of the open EverOS implementation: large enough that rank 1 and rank 2 are close.
RRF_K = 60

# Logistic fusion of cosine and BM25 into a 0..1 relevance. These are the open EverOS
# implementation's weights, fitted for its embedder; Loci's defaults (settings MRAG_LR_* for
# episodes and chunks, MRAG_FACT_* for facts) are re-fitted for multilingual-e5-small with bench/fit_fusion.py, whose cosines
# crowd into 0.75-0.9 and so need a steeper cosine weight.
LR_W_COS = 6.2747
LR_W_BM25 = 0.09395
LR_BIAS = -4.8581


def rrf(rankings: list[list[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal rank fusion: sum of 1 / (k + rank) over every ranking an id appears in (rank from 1)."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused


def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def logistic_relevance(cos: float, bm25: float, w_cos: float = LR_W_COS, w_bm25: float = LR_W_BM25,
                       bias: float = LR_BIAS) -> float:
    """P(relevant | cosine, bm25) under the fitted logistic model."""
    return sigmoid(w_cos * cos + w_bm25 * bm25 + bias)


# The fusion weights, read from the settings once per process (a search scores hundreds of items;
# three settings reads each cost more than the sigmoid), forgotten when a test overrides a setting.
_weights: dict[str, tuple[float, float, float]] = {}


@receiver(setting_changed)
def _forget_weights(**kwargs) -> None:
    _weights.clear()


def _read_weights(kind: str) -> tuple[float, float, float]:
    p = settings
    _weights[kind] = ((p.MRAG_LR_W_COS, p.MRAG_LR_W_BM25, p.MRAG_LR_BIAS) if kind == "episode"
                      else (p.MRAG_FACT_W_COS, p.MRAG_FACT_W_BM25, p.MRAG_FACT_BIAS))
    return _weights[kind]


def episode_score(cos: float, bm25: float) -> float:
    """An episode's (or a chunk's) fused score: a summary scores differently from a sentence."""
    return logistic_relevance(cos, bm25, *(_weights.get("episode") or _read_weights("episode")))


def fact_score(cos: float, bm25: float) -> float:
    """An atomic fact's fused score, with the facts' own weights."""
    return logistic_relevance(cos, bm25, *(_weights.get("fact") or _read_weights("fact")))


def boosted(candidates: list, entity_scores: dict[str, float]) -> list:
    """Each candidate's score plus MRAG_ENTITY_WEIGHT times its entity score (shown as scores["entity"])."""
    for c in candidates:
        if "entity" in c.scores:  # boosted once, however often a stage reads it
            continue
        s = entity_scores.get(c.id, 0.0)
        c.scores["entity"] = s
        c.score += settings.MRAG_ENTITY_WEIGHT * s
    return candidates


def _scored_pool(ranked: list, expander) -> dict:
    """The ranked candidates and every other fact the expansion scored (its `expanded` table)."""
    pool = {c.id: c for c in ranked}
    for finals in expander.expanded.values():
        for fact in finals:
            pool.setdefault(fact.id, fact)
    return pool


def weigh_assistant_facts(scope, ranked: list, expander, weight: float) -> list:
    """The same number of results, facts said in an assistant's reply scored × `weight`.

    They compete again with every fact the expansion scored, so a user's statement the replies'
    facts had pushed out can take a freed place."""
    pool = _scored_pool(ranked, expander)
    memories = results.load_memories(scope, [c.id for c in pool.values() if c.kind == "atomic_fact"])
    replies = results.assistant_messages(scope, [m for m in memories.values() if m.source_message_ids])
    weighed = []
    for c in pool.values():
        memory = memories.get(c.id)
        said_in = (memory.user_id, memory.session_id, memory.source_message_ids[0]) if (
            memory is not None and memory.source_message_ids) else None
        if said_in in replies:
            c = replace(c, score=c.score * weight, scores={**c.scores, "assistant_weight": weight})
        weighed.append(c)
    return sorted(weighed, key=lambda c: c.score, reverse=True)[: len(ranked)]


def spread_over_messages(scope, ranked: list, expander, per_message: int) -> list:
    """The same number of results, with at most `per_message` facts said in any one message.

    A long reply yields many similar facts that score alike and, together, fill the list with one
    message; the best facts of other messages the expansion scored take their places, in score
    order. Only when none is left do the surplus facts come back.
    """
    pool = _scored_pool(ranked, expander)
    memories = results.load_memories(scope, [c.id for c in pool.values() if c.kind == "atomic_fact"])

    def said_in(c):
        memory = memories.get(c.id)
        return memory.source_message_ids[0] if memory is not None and memory.source_message_ids else None

    return at_most_per_key(sorted(pool.values(), key=lambda c: c.score, reverse=True), said_in,
                           per_message)[: len(ranked)]


def at_most_per_key(items: list, key, per_key: int) -> list:
    """`items` in their order, at most `per_key` of any one key(item) first, the surplus after them
    (in their order); an item whose key is None is never surplus."""
    taken: dict = {}
    chosen, surplus = [], []
    for item in items:
        k = key(item)
        if k is not None and taken.get(k, 0) >= per_key:
            surplus.append(item)
            continue
        if k is not None:
            taken[k] = taken.get(k, 0) + 1
        chosen.append(item)
    return chosen + surplus


def relevance(signal: str, value: float) -> float:
    """The calibrated relevance every response item carries: 'mrag' for a fact's final or an episode's
    score, 'chunk' for a chunk's (retrieval/relevance.py's maps, fitted by bench/fit_relevance.py)."""
    return calibrated(signal, value)
