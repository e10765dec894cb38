"""The configured index projections: thin accessors over the backend handler (common.backends).

`vector_index()` and `keyword_index()` are the `default` aliases of LOCI_VECTOR_INDEX /
LOCI_KEYWORD_INDEX (`BACKEND` dotted path, `OPTIONS` dict), in the build the default aliases serve
now (retrieval.builds); `vector_index(build=n)` is one build in particular (a reindex writing it).
The checks every backend applies to its arguments (filters, rows, top_k) live here so they are the
same everywhere.
"""

import math
import numbers

from common.backends import DEFAULT_ALIAS, keyword_indexes, vector_indexes
from retrieval import builds
from retrieval.backends.base import (
    KINDS,
    LocalServer,
    MAX_METADATA_KEYS,
    MAX_METADATA_STRING,
    METADATA_KEY_RE,
    METADATA_OPS,
    SCOPE_FIELDS,
    IndexFilter,
    IndexRow,
    KeywordIndex,
    MetadataCondition,
    VectorIndex,
)


def _build(alias: str, build: int | None) -> int:
    if build is not None:
        return build
    if alias != DEFAULT_ALIAS:
        return 0  # builds are of the default aliases; another alias is what its settings say
    return builds.current().live.number


def vector_index(alias: str = DEFAULT_ALIAS, *, build: int | None = None) -> VectorIndex:
    """The vector index of `alias`, in the live build unless `build` says which."""
    return vector_indexes.get(alias, build=_build(alias, build))


def keyword_index(alias: str = DEFAULT_ALIAS, *, build: int | None = None) -> KeywordIndex:
    """The keyword index of `alias`, in the live build unless `build` says which."""
    return keyword_indexes.get(alias, build=_build(alias, build))


def reset_backends() -> None:
    """Close and forget the loaded indexes; the next call builds them again from settings."""
    vector_indexes.reset()
    keyword_indexes.reset()


# --- What a backend says of its own engine (the optional class attributes of base._IndexContract),
# read from the class its default alias names: nothing is built or connected to ask.

def vector_engine() -> str:
    """The vector index as a user knows it: "The vector index (Milvus at http://…)"."""
    return f"The vector index ({_described(vector_indexes)})"


def keyword_engine() -> str:
    return f"The keyword index ({_described(keyword_indexes)})"


def _described(handler) -> str:
    backend = handler.backend(DEFAULT_ALIAS)
    describe = getattr(backend, "describe", None)
    return describe(handler.options(DEFAULT_ALIAS)) if describe else backend.__name__


def transient_engine(exc: BaseException) -> str | None:
    """The index whose backend says `exc` is one of its engine's transient errors, named; else None.

    Both, when both backends claim it: the default SQLite files raise the same "database is locked"."""
    claimed = []
    for handler, named in ((vector_indexes, vector_engine), (keyword_indexes, keyword_engine)):
        transient = getattr(handler.backend(DEFAULT_ALIAS), "transient", None)
        if transient is not None and transient(exc):
            claimed.append(named())
    if len(claimed) > 1:
        return f"{claimed[0]} or {claimed[1][0].lower()}{claimed[1][1:]}"
    return claimed[0] if claimed else None


def local_servers() -> list[LocalServer]:
    """The local servers the configured indexes need started (every build of an alias shares its
    alias's server, so the default aliases' are all there are)."""
    servers = []
    for handler in (vector_indexes, keyword_indexes):
        local_server = getattr(handler.backend(DEFAULT_ALIAS), "local_server", None)
        server = local_server(handler.options(DEFAULT_ALIAS)) if local_server else None
        if server is not None:
            servers.append(server)
    return servers


# --- Argument checks shared by every backend. Filters arrive from code that built them out of
# request data, so a wrong type is refused here rather than reaching an engine's query language.

MAX_TOP_K = 16384  # Milvus' ceiling on limit; the keyword backends use the same one


def _int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must not be negative")
    return int(value)


def _ints(values, name: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a tuple of ints")
    return tuple(dict.fromkeys(_int(v, name) for v in values))


def _str(value, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, got {type(value).__name__}")
    return value


def _strs(values, name: str) -> tuple[str, ...]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a tuple of str")
    return tuple(dict.fromkeys(_str(v, name) for v in values))


def clean_filter(flt: IndexFilter) -> IndexFilter:
    """`flt` with every value type-checked (ValueError otherwise) and duplicates removed."""
    if not isinstance(flt, IndexFilter):
        raise ValueError(f"expected an IndexFilter, got {type(flt).__name__}")
    return IndexFilter(
        tenant_id=_int(flt.tenant_id, "tenant_id"),
        kb_ids=_ints(flt.kb_ids, "kb_ids"),
        exclusive=bool(flt.exclusive),
        kinds=_strs(flt.kinds, "kinds"),
        document_ids=_ints(flt.document_ids, "document_ids"),
        parent_ids=_strs(flt.parent_ids, "parent_ids"),
        or_ids=_strs(flt.or_ids, "or_ids"),
        ids=_strs(flt.ids, "ids"),
        user_id=None if flt.user_id is None else _str(flt.user_id, "user_id"),
        session_id=None if flt.session_id is None else _str(flt.session_id, "session_id"),
        statuses=_strs(flt.statuses, "statuses"),
        **{f: None if getattr(flt, f) is None else _str(getattr(flt, f), f) for f in SCOPE_FIELDS},
        metadata=tuple(_condition(c) for c in flt.metadata),
    )


def metadata_key(key) -> str:
    if not isinstance(key, str) or not METADATA_KEY_RE.match(key):
        raise ValueError(f"metadata key {key!r} must match {METADATA_KEY_RE.pattern}")
    return key


def metadata_value(value) -> str | int | float:
    """A str (at most MAX_METADATA_STRING characters) or a finite number; never a bool."""
    if isinstance(value, str):
        if len(value) > MAX_METADATA_STRING:
            raise ValueError(f"a metadata string is longer than {MAX_METADATA_STRING} characters")
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if isinstance(value, numbers.Integral):
            return int(value)
        if not math.isfinite(float(value)):
            raise ValueError("a metadata number must be finite")
        return float(value)
    raise ValueError(f"a metadata value must be a string or a number, got {type(value).__name__}")


def clean_metadata(metadata) -> dict:
    """A row's metadata map, checked (ValueError otherwise)."""
    if not isinstance(metadata, dict):
        raise ValueError("metadata must be a dict")
    if len(metadata) > MAX_METADATA_KEYS:
        raise ValueError(f"metadata has more than {MAX_METADATA_KEYS} keys")
    return {metadata_key(k): metadata_value(v) for k, v in metadata.items()}


def _condition(cond) -> MetadataCondition:
    if not isinstance(cond, MetadataCondition):
        raise ValueError(f"expected a MetadataCondition, got {type(cond).__name__}")
    if cond.op not in METADATA_OPS:
        raise ValueError(f"metadata op must be one of {METADATA_OPS}")
    if isinstance(cond.values, (str, bytes)) or not hasattr(cond.values, "__iter__"):
        raise ValueError("MetadataCondition.values must be a tuple")
    values = tuple(dict.fromkeys(metadata_value(v) for v in cond.values))
    if cond.op == "in" and not values:
        raise ValueError("a metadata 'in' condition needs at least one value")
    if cond.op != "in" and (len(values) != 1 or isinstance(values[0], str)):
        raise ValueError(f"a metadata {cond.op!r} condition takes exactly one number")
    return MetadataCondition(metadata_key(cond.key), cond.op, values)


def metadata_number(value) -> float | None:
    """A clean metadata value as a float when it is a number (the form ranges and equality compare)."""
    return None if isinstance(value, str) else float(value)


def matches_nothing(flt: IndexFilter) -> bool:
    """No permitted knowledge base means no rows, whatever else the filter says."""
    return not flt.kb_ids


def clean_rows(rows: list[IndexRow], *, need_vector: bool = False) -> list[IndexRow]:
    """Type-checked rows, the last one winning when an id repeats (so a batch upserts idempotently)."""
    by_id: dict[str, IndexRow] = {}
    for row in rows:
        if not isinstance(row, IndexRow):
            raise ValueError(f"expected IndexRow, got {type(row).__name__}")
        if not isinstance(row.id, str) or not row.id:
            raise ValueError("IndexRow.id must be a non-empty str")
        _int(row.tenant_id, "tenant_id"), _int(row.kb_id, "kb_id"), _int(row.document_id, "document_id")
        if row.kind not in KINDS:
            raise ValueError(f"IndexRow.kind must be one of {KINDS}, got {row.kind!r}")
        for name in ("text", "parent_id", "status", "user_id", "session_id", *SCOPE_FIELDS):
            _str(getattr(row, name), name)
        row.metadata = clean_metadata(row.metadata)
        if need_vector and not row.vector:
            raise ValueError(f"IndexRow {row.id!r} has no vector")
        by_id.pop(row.id, None)
        by_id[row.id] = row
    return list(by_id.values())


def check_top_k(top_k) -> int:
    """The limit to ask the engine for: top_k in 1..MAX_TOP_K, or -1 for as many as it allows."""
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral):
        raise ValueError("top_k must be an int")
    if top_k == -1:
        return MAX_TOP_K
    if not 1 <= top_k <= MAX_TOP_K:
        raise ValueError(f"top_k must be -1 or between 1 and {MAX_TOP_K}, got {top_k}")
    return int(top_k)


def check_query(query) -> str:
    """A keyword query must be text; an empty one is allowed and finds nothing."""
    if not isinstance(query, str):
        raise ValueError(f"query must be a str, got {type(query).__name__}")
    return query
