"""A primary embedder with a fallback, switched to automatically when the primary fails.

Decision: the two must have the same `dim` (checked when the pair is built), because the vector
index is named by dim and a query vector of another width cannot be searched at all. Equal dims do
not make two *models* comparable, though: the fallback is meant to be the same model served
elsewhere (a replica, or a self-hosted e5-small behind the bundled one). A pair of different models
is allowed with a warning; their vectors then mix in one index until the next reindex.
"""

import logging
import threading
import time

import numpy as np
from django.core.exceptions import ImproperlyConfigured

from retrieval.embeddings.base import Embedder, EmbeddingError

logger = logging.getLogger(__name__)


class FailoverEmbedder:
    """Ask the primary; when it raises, log a warning and ask the fallback (same dim) instead."""

    @property
    def thread_safe(self) -> bool:  # its own state is under _lock; shared when both providers are
        return all(getattr(p, "thread_safe", False) for p in (self.primary, self.fallback))

    def __init__(self, primary: Embedder, fallback: Embedder, *, cooldown: float = 30.0):
        if primary.dim != fallback.dim:
            raise ImproperlyConfigured(
                f"the fallback embedder {fallback.name} is {fallback.dim}-d but the primary {primary.name} is "
                f"{primary.dim}-d; a fallback must have the primary's dimension"
            )
        if primary.name != fallback.name:
            logger.warning(
                "embedding fallback %s is a different model from the primary %s: its vectors are not comparable, "
                "so documents embedded during a failover should be reindexed", fallback.name, primary.name,
            )
        self.primary = primary
        self.fallback = fallback
        # After a failure the primary is skipped for this long, so a dead endpoint costs one
        # timeout per cooldown rather than one per call.
        self.cooldown = cooldown
        self._skip_primary_until = 0.0
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.primary.name

    @property
    def dim(self) -> int:
        return self.primary.dim

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._call("embed_documents", texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._call("embed_query", text)

    def _call(self, method: str, arg):
        with self._lock:
            primary_first = time.monotonic() >= self._skip_primary_until
        # While the primary cools down the fallback goes first, but the primary still gets a
        # chance when the fallback fails too.
        order = (self.primary, self.fallback) if primary_first else (self.fallback, self.primary)
        errors = []
        for provider in order:
            try:
                result = getattr(provider, method)(arg)
            except Exception as exc:  # any failure of one provider is what the other one is for
                errors.append(f"{provider.name}: {exc}")
                if provider is self.primary:
                    with self._lock:
                        self._skip_primary_until = time.monotonic() + self.cooldown
                    logger.warning("embedder %s failed (%s); using fallback %s", provider.name, exc, self.fallback.name)
                continue
            if result.shape[-1] != self.dim:
                errors.append(f"{provider.name}: returned {result.shape[-1]}-d vectors, expected {self.dim}")
                continue
            if provider is self.primary and not primary_first:
                with self._lock:
                    self._skip_primary_until = 0.0
            return result
        # Transient: with both failing at least one is a remote server, which may answer later.
        raise EmbeddingError("every embedder failed: " + "; ".join(errors), transient=True)
