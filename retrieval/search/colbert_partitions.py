"""The centroid index of one knowledge base as the ColBERT channel reads it, cached per process.

A partition (a KB, one ColBERT model) holds, for each of its messages with stored vectors: the
message's pk, its scope columns (user, session, agent, group, run: the search's narrowing filters)
and which centroids its tokens fall into (a k × messages presence matrix; retrieval/backends/token_codes.py
codes the tokens). Loading it reads the codes of every row (a byte per token, not the vectors), so it
is cached and checked on every search against the KB's codebook row, (pk, generation):

- a write of coded rows and every removal through retrieval/projection/removal.py bump `generation`,
  a refit makes a new codebook state, so one indexed row read (~0.1 ms) says whether the copy is current.
  Counting the KB's rows instead (max(pk) + count) reads an index of every message: ~10 ms at 100k;
- what the marker can miss is a row removed by a foreign key's cascade alone (a message deleted with
  its KB, tenant or directly) or a message whose scope changed: the cached copy may then propose a
  message that is gone or out of scope. It is only ever a proposal: the channel's exact stage reads
  the candidates' vectors from the database under the search's filter (colbert_channel.exact), so a
  stale copy can cost recall, never leak a message.

Rows not coded by the current codebook (written while the channel was off, or racing a refit) are
coded in memory when the partition loads, from their stored vectors, so none is invisible.
"""

import threading
from dataclasses import dataclass

import numpy as np

from retrieval.backends import token_codes
from retrieval.backends.base import IndexFilter
from retrieval.models import TokenCodebook, TokenVectors

SCOPES = ("user_id", "session_id", "agent_id", "group_id", "run_id")

_lock = threading.Lock()
_cache: dict[tuple[int, str], "Partition"] = {}


@dataclass
class Partition:
    marker: tuple[int, int]  # (codebook pk, generation)
    tenant_id: int
    centroids: np.ndarray  # k × dim float32
    message_pks: np.ndarray  # (n,) int64
    presence: np.ndarray  # k × n bool: message j has a token coded to centroid c
    codes: np.ndarray  # every message's token codes, one after another (uint8)
    offsets: np.ndarray  # (n + 1,) int64: message j's codes are codes[offsets[j]:offsets[j + 1]]
    scope_values: dict[str, dict[str, int]]  # scope column → value → its code in `scope_codes`
    scope_codes: dict[str, np.ndarray]  # scope column → (n,) int32

    def in_scope(self, flt: IndexFilter) -> np.ndarray:
        """The messages the filter's narrowing fields (user, session, agent, group, run) let through."""
        mask = np.ones(len(self.message_pks), dtype=bool)
        for column in SCOPES:
            value = getattr(flt, column)
            if value is not None:
                mask &= self.scope_codes[column] == self.scope_values[column].get(value, -1)
        return mask


def partition(kb_id: int, model: str) -> Partition | None:
    """The KB's cached partition, reloaded when its codebook moved on; None when it has no codebook."""
    marker = TokenCodebook.objects.filter(kb_id=kb_id, model=model).values_list("pk", "generation").first()
    key = (kb_id, model)
    if marker is None:
        with _lock:
            _cache.pop(key, None)
        return None
    cached = _cache.get(key)
    if cached is not None and cached.marker == marker:
        return cached
    loaded = _load(kb_id, model)
    if loaded is not None:
        with _lock:  # two threads loading at once both store a current copy: the last one stays
            _cache[key] = loaded
    return loaded


def _load(kb_id: int, model: str) -> Partition | None:
    book = TokenCodebook.objects.filter(kb_id=kb_id, model=model).first()
    if book is None:
        return None
    centroids = token_codes.centroids_of(book)
    rows = list(TokenVectors.objects.filter(message__kb_id=kb_id, model=model).order_by("message_id").values_list(
        "message_id", "codebook_id", "codes", *(f"message__{c}" for c in SCOPES)))
    per_row: list[np.ndarray] = [np.zeros(0, dtype=np.uint8)] * len(rows)
    uncoded = []
    for j, row in enumerate(rows):
        if row[1] == book.pk and row[2] is not None:
            per_row[j] = np.frombuffer(bytes(row[2]), dtype=np.uint8)
        else:
            uncoded.append(j)
    if uncoded:  # coded here from their vectors (reconcile --repair stores the codes)
        stored = dict(TokenVectors.objects.filter(message_id__in=[rows[j][0] for j in uncoded], model=model)
                      .values_list("message_id", "data"))
        for j in uncoded:
            data = stored.get(rows[j][0])
            if data is not None:
                per_row[j] = token_codes.assign(np.frombuffer(bytes(data), dtype=np.int8)
                                                .reshape(-1, centroids.shape[1]), centroids)
    lengths = np.array([len(c) for c in per_row], dtype=np.int64)
    codes = np.concatenate(per_row) if rows else np.zeros(0, dtype=np.uint8)
    presence = np.zeros((book.k, len(rows)), dtype=bool)
    presence[codes, np.repeat(np.arange(len(rows)), lengths)] = True
    scope_values: dict[str, dict[str, int]] = {}
    scope_codes: dict[str, np.ndarray] = {}
    for i, column in enumerate(SCOPES):
        values = scope_values.setdefault(column, {})
        scope_codes[column] = np.fromiter((values.setdefault(r[3 + i], len(values)) for r in rows), dtype=np.int32,
                                          count=len(rows))
    return Partition((book.pk, book.generation), book.tenant_id, centroids,
                     np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), presence, codes,
                     np.concatenate([[0], np.cumsum(lengths)]), scope_values, scope_codes)


def forget() -> None:
    """Drop every cached partition (tests, and a process told its database changed under it)."""
    with _lock:
        _cache.clear()
