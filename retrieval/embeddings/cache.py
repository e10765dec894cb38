"""Embedding cache keyed by (vector space name, sha256(text)), in one SQLite file shared by all processes.

Re-ingesting a document, retrying a task or reindexing after a crash embeds the same texts again;
the cache makes that a lookup. Rows are immutable (a text's vector under one model never changes),
so concurrent writers cannot disagree: an upsert (`INSERT OR REPLACE`) and WAL are all the
coordination needed.
A connection is opened per call, which keeps it safe across threads and forked workers.
Query vectors never go to disk; each process keeps the last ones it computed in memory.
"""

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from contextlib import closing
from pathlib import Path

import numpy as np

from common.sqlite import use_wal
from retrieval.embeddings.base import Embedder, check_texts, empty

# SQLite's default limit on host parameters was 999 before 3.32; stay under it.
_CHUNK = 500
# Recent query vectors kept in memory: 1.5 KB each at 384-d, so 1024 of them cost 1.5 MB.
QUERY_CACHE_SIZE = 1024
# Seconds a connection waits for another process's lock.
_TIMEOUT = 30


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Vectors on disk keyed by (model name, sha256(text))."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as conn, conn:
            use_wal(conn, _TIMEOUT)
            conn.execute(
                "CREATE TABLE IF NOT EXISTS embedding (model TEXT NOT NULL, sha256 TEXT NOT NULL,"
                " vector BLOB NOT NULL, PRIMARY KEY (model, sha256)) WITHOUT ROWID"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=_TIMEOUT)

    def get_many(self, model: str, keys: list[str], dim: int) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        with closing(self._connect()) as conn:
            for start in range(0, len(unique), _CHUNK):
                chunk = unique[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(f"SELECT sha256, vector FROM embedding WHERE model = ? AND sha256 IN ({marks})", [model, *chunk])
                for key, blob in rows:
                    if len(blob) == dim * 4:  # a row of another width is stale (model re-configured): a miss
                        found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        rows = [(model, key, np.asarray(vector, dtype=np.float32).tobytes()) for key, vector in items.items()]
        with closing(self._connect()) as conn, conn:
            conn.executemany("INSERT OR REPLACE INTO embedding (model, sha256, vector) VALUES (?, ?, ?)", rows)

    def count(self, model: str | None = None) -> int:
        with closing(self._connect()) as conn:
            if model is None:
                return conn.execute("SELECT COUNT(*) FROM embedding").fetchone()[0]
            return conn.execute("SELECT COUNT(*) FROM embedding WHERE model = ?", [model]).fetchone()[0]

    def prune(self, keep_models: list[str]) -> int:
        """Delete the vectors of every other model (after a model change and reindex); returns rows deleted."""
        marks = ",".join("?" * len(keep_models)) or "''"
        with closing(self._connect()) as conn, conn:
            return conn.execute(f"DELETE FROM embedding WHERE model NOT IN ({marks})", keep_models).rowcount


class CachedEmbedder:
    """An embedder whose documents are looked up in an EmbeddingCache before the model is asked."""

    # A connection per call to the disk cache, the in-memory query cache under its lock; safe to
    # share when the wrapped provider is.
    @property
    def thread_safe(self) -> bool:
        return getattr(self.inner, "thread_safe", False)

    def __init__(self, inner: Embedder, cache: EmbeddingCache):
        self.inner = inner
        self.cache = cache
        self.hits = 0
        self.misses = 0
        self._stats_lock = threading.Lock()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()  # least recently used first
        self._queries_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return empty(self.dim)
        # Documents only: the key is the text, so "passage" vectors never answer a query.
        space = f"{self.name}|document"
        keys = [text_key(t) for t in texts]
        found = self.cache.get_many(space, keys, self.dim)
        missing = {k: t for k, t in zip(keys, texts) if k not in found}  # de-duplicates repeated texts too
        if missing:
            fresh = self.inner.embed_documents(list(missing.values()))
            computed = dict(zip(missing, fresh))
            self.cache.put_many(space, computed)
            found.update(computed)
        with self._stats_lock:
            self.hits += len(texts) - len(missing)
            self.misses += len(missing)
        return np.vstack([found[k] for k in keys]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> np.ndarray:
        # Queries stay in memory, not on disk: a disk write per search would cost more than it saves,
        # but the same query often comes back within minutes (the console re-run with another
        # method, a retried or paged API call), and embedding it again costs 10-40 ms of CPU.
        with self._queries_lock:
            vector = self._queries.get(text)
            if vector is not None:
                self._queries.move_to_end(text)
                return vector
        vector = np.asarray(self.inner.embed_query(text), dtype=np.float32)
        vector.flags.writeable = False  # shared by every caller that asks again
        with self._queries_lock:
            self._queries[text] = vector
            if len(self._queries) > QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        return vector

    def clear_query_cache(self) -> None:
        with self._queries_lock:
            self._queries.clear()
