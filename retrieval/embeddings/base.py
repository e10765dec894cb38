"""The embedding provider contract, and the small helpers every provider shares."""

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Texts in, float32 L2-normalised rows out; `name` changes whenever the vectors would.

    Construction: the BACKEND of a LOCI_EMBEDDERS alias is called with its OPTIONS; a missing or
    invalid setting raises ImproperlyConfigured then, and no model loads or connection opens until
    the first call. Shared by threads only when it sets `thread_safe = True`.
    Every method: the same text gives the same vector (deterministic, so the disk cache is exact);
    a wrong argument type raises TypeError; a provider that cannot produce vectors (unreachable,
    malformed reply, wrong width) raises EmbeddingError, never returns a partial result.
    """

    name: str  # identifies the vector space: a new name (or dim) means the index needs a reindex
    dim: int  # the width of every vector; fixed for the embedder's life

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """One unit-length float32 row per text, in order, shape (len(texts), dim); an empty list
        gives shape (0, dim), one string (not in a list) raises TypeError."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Shape (dim,), unit length; asymmetric models (e5) embed queries differently from documents."""
        ...


class EmbeddingError(Exception):
    """An embedding provider could not produce vectors (unreachable, bad reply, wrong width).

    The provider says whether it is `transient` (its server did not answer, or rate-limited us: the
    same call later may succeed, so a document's stage waits and retries) or not (a bad reply, a wrong
    width: the same every time)."""

    def __init__(self, message: str = "", *, transient: bool = False):
        super().__init__(message)
        self.transient = transient


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """float32 rows scaled to unit length; an all-zero row stays zero instead of becoming NaN."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim != 2:
        raise EmbeddingError(f"expected a 2-D array of vectors, got shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def batches(texts: list[str], size: int) -> Iterator[list[str]]:
    if size < 1:
        raise ValueError(f"batch size must be at least 1, got {size}")
    for start in range(0, len(texts), size):
        yield texts[start : start + size]


def check_texts(texts: list[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed_documents takes a list of strings; use embed_query for one text")
    texts = list(texts)
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"texts must be strings, got {type(text).__name__}")
    return texts


def empty(dim: int) -> np.ndarray:
    return np.zeros((0, dim), dtype=np.float32)


def embed_in_batches(texts: list[str], *, dim: int, batch_size: int, encode: Callable[[list[str]], object],
                     lock: AbstractContextManager) -> np.ndarray:
    """`texts` through a bundled model's `encode`, `batch_size` at a time and one call at a time
    (`lock`: the model already uses every core), as L2-normalised float32 rows."""
    texts = check_texts(texts)
    if not texts:
        return empty(dim)
    parts = []
    for batch in batches(texts, batch_size):
        with lock:
            parts.append(np.asarray(encode(batch), dtype=np.float32).reshape(len(batch), dim))
    return normalise_rows(np.vstack(parts))
