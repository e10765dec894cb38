"""The two index protocols (vector, keyword) and the row and filter types they share.

Indexes are projections of the database: every row can be rebuilt from a Chunk or a Memory.
Filters are structured values, never strings: each backend turns them into its own engine's
query with whitelisted fields and escaped or parameterised values, so user input cannot
change the shape of the query.
"""

from dataclasses import dataclass, field
from typing import Iterable, Protocol

from memory import user_metadata

KINDS = ("chunk", "episode", "atomic_fact", "profile", "foresight", "agent_case", "agent_skill",
         "question",  # "question": a candidate question, only ever searched to lift its source (parent_id)
         "summary")  # a node of a summary tree (retrieval/summary_tree)
# The scopes a row carries beside its user and session (Mem0's agent_id and run_id; a group chat's id).
SCOPE_FIELDS = ("agent_id", "group_id", "run_id")

# User metadata on a row: a small flat map of string or number values (tags, category, source,
# chapter...), by the core's rules (memory/user_metadata.py). Keys are plain identifiers, so a backend
# may use one inside a field path (a JSON path, a Milvus JSON key) without quoting; values are only
# ever bound or escaped literals.
METADATA_KEY_RE = user_metadata.KEY_RE
MAX_METADATA_KEYS = user_metadata.MAX_KEYS
MAX_METADATA_STRING = user_metadata.MAX_STRING  # characters of a string value
METADATA_OPS = ("in", "gt", "gte", "lt", "lte")


@dataclass(frozen=True)
class MetadataCondition:
    """One condition on a row's metadata value under `key`; a row without the key never matches.

    op "in": the value equals one of `values` (str or number; a string never equals a number, and
    numbers compare by value, 3 == 3.0). "gt"/"gte"/"lt"/"lte": `values` is one number and the row's
    value is a number in that relation (a string value never matches a range).
    """

    key: str
    op: str
    values: tuple = ()


def metadata_holds(metadata, cond: MetadataCondition) -> bool:
    """MetadataCondition's semantics on one row's metadata, for backends that filter in Python."""
    if not isinstance(metadata, dict) or cond.key not in metadata:
        return False
    value = metadata[cond.key]
    if cond.op == "in":
        return any(type(v) is str and type(value) is str and v == value
                   or type(v) is not str and type(value) is not str and float(v) == float(value)
                   for v in cond.values)
    if isinstance(value, str):
        return False
    bound = float(cond.values[0])
    return {"gt": value > bound, "gte": value >= bound, "lt": value < bound, "lte": value <= bound}[cond.op]


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
    agent_id: str = ""
    group_id: str = ""
    run_id: str = ""
    metadata: dict = field(default_factory=dict)  # {key: str | int | float}, keys per METADATA_KEY_RE
    # The script of the item's own text (retrieval.relevance.script: "cjk", "latin", "mixed"; "" not
    # known). Search's cross-language shift needs it for every hit; a backend that returns it in
    # Hit.extra["script"] spares a database read of the texts. Not filterable, and optional: a
    # backend may drop it, and a hit without it has its text read instead.
    script: str = ""


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
    # Scopes: None does not narrow; a str (the empty one included: rows of no agent) must equal the row's.
    agent_id: str | None = None
    group_id: str | None = None
    run_id: str | None = None
    metadata: tuple[MetadataCondition, ...] = ()  # every condition must hold


@dataclass
class Hit:
    id: str
    score: float  # cosine similarity for vectors, BM25 (higher is better) for keyword
    extra: dict = field(default_factory=dict)


class _IndexContract(Protocol):
    """What every index backend does (the vector and keyword protocols add `search`).

    Construction: `Backend(options: dict)`, OPTIONS of its LOCI_*_INDEX alias; a missing or invalid
    option raises ImproperlyConfigured. No connection is opened until first use. A backend shared by
    threads sets `thread_safe = True` (else the handler builds one per thread), and survives a fork
    (a connection inherited from the parent is neither used nor closed in the child).

    Every method checks its arguments before anything reaches the engine and raises ValueError for
    a wrong type or range (retrieval.backends.clean_filter / clean_rows / check_top_k). A filter
    with no kb_ids matches nothing; a user-supplied value is only ever a value (escaped or bound),
    never part of the query's shape. An engine error propagates as the engine's own exception; a
    table set, collection or index that does not exist yet reads as empty, without error.

    Optional, on the class (retrieval.backends reads them with a default when a backend has none):
    - `transient(exc) -> bool`: whether `exc`, raised by this backend's engine, means "not now"
      (unreachable, timed out, rate limited, briefly locked), so a stage retries instead of failing
      the document. Default: nothing is transient.
    - `describe(options) -> str`: the engine as a user knows it ("Milvus at http://…"), in the reason
      a document fails with when the engine did not answer. Default: the class's name.
    - `local_server(options) -> LocalServer | None`: a server on this machine that the processes
      using the backend share (Milvus Lite); `manage.py up` starts it before its children and lets
      go of it after them. Default: none.
    """

    def upsert(self, rows: list[IndexRow], *, exclusive: bool = False) -> None:
        """Insert or replace `rows` by id (the last of a repeated id wins): idempotent, so a retried
        task never duplicates a row, and a replaced row keeps none of its old text. `exclusive`
        routes every row to its tenant's own table set. A row is searchable once this returns."""
        ...

    def delete(self, flt: IndexFilter) -> int:
        """Remove every row the filter matches (the `statuses` narrowing included: pass () for any
        status), in every table set of the filter's isolation and every vector width; return how many."""
        ...

    def count(self, flt: IndexFilter) -> int:
        """How many rows the filter matches, exactly."""
        ...

    def ids(self, flt: IndexFilter) -> Iterable[str]:
        """The ids of every row the filter matches, any number, in pages (no limit, no open
        transaction between pages). Arguments are checked when called, not on the first next()."""
        ...

    def drop_all(self) -> None:
        """Remove every table set of this backend's namespace (and only that: another prefix, build
        or analyzer generation's is left alone, older generations of its own included); usable afterwards."""
        ...

    def close(self) -> None:
        """Release connections; the backend reconnects if used again."""
        ...

    def ping(self) -> None:
        """One cheap round trip to the engine (the health check); raises when it is unreachable."""
        ...

    @staticmethod
    def build_options(options: dict, build: int) -> dict:
        """The OPTIONS of projection build `build` > 0: the same engine, a namespace of its own
        that this namespace's drop_all, count, ids and delete never touch (retrieval/builds.py)."""
        ...


class LocalServer(Protocol):
    """A backend's server on this machine, started by `up` before the processes that use it."""

    def start(self) -> str:
        """Start it unless it runs; return what to tell the person who started Loci (where it listens)."""
        ...

    def stop(self) -> str:
        """Let go of it after `up`'s children stopped; return what to tell (e.g. that another process
        still uses it, so it stops when that one exits)."""
        ...


class VectorIndex(_IndexContract, Protocol):
    """Rows with a vector, searched by cosine similarity; each vector width in its own collection,
    so rows of a model of another width are never compared with a query (they are not found)."""

    def search(self, vector: list[float], flt: IndexFilter, top_k: int, min_score: float | None = None) -> list[Hit]:
        """At most `top_k` rows (-1: as many as the engine allows) the filter matches, best first,
        `Hit.score` the cosine similarity (1.0 for the row's own vector), none under `min_score`.
        The filter applies inside the search, before the limit, never to its results. Rows picked
        by `ids`, `parent_ids` or `or_ids` are all scored (exhaustively, not approximately).
        Raises ValueError for an empty vector; upsert raises ValueError for a row without one."""
        ...

    def search_many(self, vectors: list[list[float]], flt: IndexFilter, top_k: int,
                    min_score: float | None = None) -> list[list[Hit]]:
        """`search` for each vector under one filter, in one request where the engine allows it:
        ingestion's duplicate check asks it for every new fact of a MemCell."""
        ...


class KeywordIndex(_IndexContract, Protocol):
    """Rows with text, searched by BM25 over retrieval.text's analysis (segmented, stemmed, the
    same in every backend, so the same query finds the same rows).

    Optional, on the class: `bm25_idf`, the idf its BM25 (k1 1.2, b 0.75) uses, which the contract
    suite's reference BM25 then computes its scores with: "fts5" (SQLite's bm25(): ln((N − n + 0.5) /
    (n + 0.5)), at least 1e-6) or "lucene" (tantivy, OpenSearch: ln(1 + (N − n + 0.5) / (n + 0.5))).
    A backend without it is not held to exact scores (e.g. statistics kept per shard).
    """

    def search(self, query: str, flt: IndexFilter, top_k: int) -> list[Hit]:
        """At most `top_k` rows matching any of the query's terms (the first 64 distinct) and the
        filter, best first, `Hit.score` the BM25 score (> 0, higher is better). Query text is only
        ever terms: no operator or field syntax of the engine gets through, and it neither errors
        nor widens the filter. An empty or stopword-only query finds nothing; a non-str raises ValueError."""
        ...
