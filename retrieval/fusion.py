"""Pure scoring and fusion functions used by every search method."""

import math

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


def blend(fact_score: float, episode_score: float, alpha: float) -> float:
    """mRAG's final fact score: α·fact + (1−α)·episode (the seed article's α = 0.5)."""
    return alpha * fact_score + (1.0 - alpha) * episode_score
