"""Clustering a level of the tree: deterministic spherical k-means over unit vectors (pure numpy).

RAPTOR clusters with Gaussian mixtures and soft membership; a node here belongs to one cluster, so
every leaf has one path to the root and a delete names the nodes above it exactly. k-means++ seeds
from a fixed generator, so the same vectors always give the same tree (a rebuild changes nothing
that did not change)."""

import math

import numpy as np

BRANCH = 6  # children a node summarises, on average: a summary of ~6 sections still reads as one topic
ITERATIONS = 20
SEED = 39  # any fixed number: only determinism matters


def clusters(vectors: np.ndarray, branch: int = BRANCH) -> list[list[int]]:
    """Groups of row indices, each sorted, ordered by their first member; fewer groups than rows."""
    n = len(vectors)
    if n <= branch:
        return [list(range(n))]
    k = math.ceil(n / branch)
    x = _unit(np.asarray(vectors, dtype=np.float32))
    centres = _seeds(x, k)
    labels = np.zeros(n, dtype=int)
    for _ in range(ITERATIONS):
        labels = np.argmax(x @ centres.T, axis=1)
        moved = _unit(np.stack([x[labels == j].sum(axis=0) if (labels == j).any() else centres[j] for j in range(k)]))
        if np.allclose(moved, centres):
            break
        centres = moved
    groups: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(int(label), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def centroid(vectors: np.ndarray) -> np.ndarray:
    return _unit(np.asarray(vectors, dtype=np.float32).sum(axis=0, keepdims=True))[0]


def _seeds(x: np.ndarray, k: int) -> np.ndarray:
    """k-means++: each next centre drawn in proportion to its distance from the nearest chosen one."""
    rng = np.random.default_rng(SEED)
    chosen = [0]  # the first item (a document's opening, a user's first episode): no draw needed
    nearest = 1.0 - x @ x[0]
    for _ in range(1, k):
        weights = np.clip(nearest, 0.0, None) ** 2
        total = float(weights.sum())
        pick = int(rng.choice(len(x), p=weights / total)) if total > 0 else len(chosen) % len(x)
        chosen.append(pick)
        nearest = np.minimum(nearest, 1.0 - x @ x[pick])
    return x[chosen]


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)
