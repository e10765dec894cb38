"""The two index protocols (vector, keyword) and the row and filter types they share.

Indexes are projections of the database: every row can be rebuilt from a Chunk or a Memory.
Filters are structured values, never strings: each backend turns them into its own engine's
query with whitelisted fields and escaped or parameterised values, so user input cannot
change the shape of the query.
"""

from dataclasses import dataclass, field
from typing import Iterable, Protocol

KINDS = ("chunk", "episode", "atomic_fact", "profile", "foresight")


@dataclass
class IndexRow:
    id: str  # "chunk:<pk>" or "memory:<uuid>"
    tenant_id: int
    kb_id: int
    kind: str
    text: str = ""  # raw text; keyword backends segment it themselves with retrieval.text
    document_id: int = 0  # 0 when the row comes from a conversation
    parent_id: str = ""  # episode id of a fact; parent chunk id of a child chunk
    status: str = "active"
    user_id: str = ""
    session_id: str = ""
    vector: list[float] | None = None


@dataclass(frozen=True)
class IndexFilter:
    """Every field narrows the result; the permission fields (tenant_id, kb_ids) are mandatory."""

    tenant_id: int
    kb_ids: tuple[int, ...]
    exclusive: bool = False  # tenant isolation mode: route to the tenant's own collection/index
    kinds: tuple[str, ...] = ()
    document_ids: tuple[int, ...] = ()
    parent_ids: tuple[str, ...] = ()
    # Rows let through beside those `parent_ids` selects: with both set, a row passes when its parent
    # is in parent_ids OR its id is in or_ids (mRAG scores a few episodes and the facts of many in one
    # call); alone, it narrows like `ids`. Every other field still narrows.
    or_ids: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()
    user_id: str | None = None
    session_id: str | None = None
    statuses: tuple[str, ...] = ("active",)


@dataclass
class Hit:
    id: str
    score: float  # cosine similarity for vectors, BM25 (higher is better) for keyword
    extra: dict = field(default_factory=dict)


class VectorIndex(Protocol):
    def upsert(self, rows: list[IndexRow], *, exclusive: bool = False) -> None: ...
    def delete(self, flt: IndexFilter) -> int: ...
    def search(self, vector: list[float], flt: IndexFilter, top_k: int, min_score: float | None = None) -> list[Hit]: ...
    def count(self, flt: IndexFilter) -> int: ...
    def ids(self, flt: IndexFilter) -> Iterable[str]: ...
    def drop_all(self) -> None: ...


class KeywordIndex(Protocol):
    def upsert(self, rows: list[IndexRow], *, exclusive: bool = False) -> None: ...
    def delete(self, flt: IndexFilter) -> int: ...
    def search(self, query: str, flt: IndexFilter, top_k: int) -> list[Hit]: ...
    def count(self, flt: IndexFilter) -> int: ...
    def ids(self, flt: IndexFilter) -> Iterable[str]: ...
    def drop_all(self) -> None: ...
