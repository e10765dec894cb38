"""Flat baselines for benchmarks: BM25 (Okapi, k1=1.2, b=0.75) over a list of texts, and dense cosine."""

import math
from collections import Counter

import numpy as np

from retrieval.text import index_terms


class FlatBM25:
    """Okapi BM25 over pre-tokenised texts; scores every text for a query (exact, no index)."""

    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.docs = [Counter(index_terms(t)) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=float)
        self.avgdl = float(self.lengths.mean()) if len(self.docs) else 0.0
        df = Counter(term for d in self.docs for term in d)
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, d in enumerate(self.docs):
            for term, tf in d.items():
                self.postings.setdefault(term, []).append((i, tf))

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.docs))
        for term in set(index_terms(query)):
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i, tf in self.postings[term]:
                norm = tf + self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avgdl)
                out[i] += idf * tf * (self.k1 + 1) / norm
        return out

    def top(self, query: str, k: int) -> list[int]:
        s = self.scores(query)
        order = np.argsort(-s, kind="stable")[:k]
        return [int(i) for i in order if s[i] > 0]


def dense_top(matrix: np.ndarray, query_vec: np.ndarray, k: int) -> list[int]:
    sims = matrix @ query_vec
    return [int(i) for i in np.argsort(-sims, kind="stable")[:k]]


def rrf_merge(rankings: list[list[int]], k: int = 60, limit: int = 100) -> list[int]:
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=fused.get, reverse=True)[:limit]
