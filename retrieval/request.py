"""Search requests: validated at the boundary, with errors a caller can act on."""

from dataclasses import dataclass, field
from datetime import datetime, timezone

from memory import user_metadata
from retrieval.backends.base import MetadataCondition

METHODS = ("keyword", "vector", "hybrid", "agentic", "paths", "navigate")
MEMORY_TYPES = ("episode", "atomic_fact", "chunk", "profile", "foresight", "agent_case", "agent_skill", "summary")
FILTER_KEYS = ("kb", "document_id", "user_id", "session_id", "valid_at", "agent_id", "group_id", "run_id", "metadata",
               "participant")
# `filters.agent_id` "*": memories of every agent (and of none). Without agent_id a search sees only
# memories written under no agent: an agent's memory reaches a user-level search only when asked for.
ANY_AGENT = "*"
METADATA_OPS = {"eq": "in", "in": "in", "gt": "gt", "gte": "gte", "lt": "lt", "lte": "lte"}
MAX_METADATA_IN = 50
MAX_TOP_K = 100
MAX_QUERY_CHARS = 2000
MAX_NEIGHBOURS = 5
# Values one list filter may hold (filters.kb, filters.document_id): every value becomes a bound
# parameter of each engine call, and 100,000 document ids cost one search 6.3 CPU-s (issue 30). A
# caller with more documents in mind filters by knowledge base instead.
MAX_FILTER_VALUES = 1000
MIN_YEAR, MAX_YEAR = 2, 9998  # dates a day or a year away from these still exist
MAX_DOCUMENT_ID = 2**63 - 1  # document ids are 64-bit (BigAutoField); a bigger one overflows the query


class SearchError(ValueError):
    """A request the caller must fix (HTTP 400), with a readable message."""


@dataclass
class SearchRequest:
    query: str
    method: str = "hybrid"
    memory_types: list[str] = field(default_factory=lambda: ["episode", "atomic_fact"])
    filters: dict = field(default_factory=dict)
    top_k: int = 10
    expand_context: bool = False
    neighbours: int = 0  # child chunks each side of an item's source chunk, with context expansion
    rerank: bool | None = None
    # When the question is asked: its relative dates ("last Thursday", "last month") are resolved
    # against it, as extraction resolved the messages' (common.dates). None: the query is left as written.
    reference_time: datetime | None = None
    # Internal (never parsed from a request): items a rescoring stage reads beyond top_k. Hybrid
    # appends the best of what its expansion already scored (hybrid.runners_up), so a stage
    # reorders a wider list without a second, larger search; 0: top_k only.
    candidates: int = 0
    # top_k as a count; -1 ("everything above the similarity floor") is capped at MAX_TOP_K. Set with
    # the request (and again by dataclasses.replace), so every stage reads an attribute.
    limit: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.limit = MAX_TOP_K if self.top_k == -1 else self.top_k


def parse_search_request(data: dict) -> SearchRequest:
    if not isinstance(data, dict):
        raise SearchError("The request body must be a JSON object.")
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise SearchError("'query' must be a non-empty string.")
    if len(query) > MAX_QUERY_CHARS:
        raise SearchError(f"'query' is longer than {MAX_QUERY_CHARS} characters (it has {len(query)}).")
    method = data.get("method") or "hybrid"
    if method not in METHODS:
        raise SearchError(f"Unknown method {method!r}; use one of: {', '.join(METHODS)}.")
    top_k = data.get("top_k", 10)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not (top_k == -1 or 1 <= top_k <= MAX_TOP_K):
        raise SearchError(f"'top_k' must be an integer from 1 to {MAX_TOP_K}, or -1 for everything above the floor.")
    memory_types = data.get("memory_types") or ["episode", "atomic_fact"]
    if isinstance(memory_types, str):
        memory_types = [memory_types]
    if not isinstance(memory_types, list) or any(t not in MEMORY_TYPES for t in memory_types):
        raise SearchError(f"'memory_types' must be a list drawn from: {', '.join(MEMORY_TYPES)}.")
    filters = data.get("filters") or {}
    if not isinstance(filters, dict):
        raise SearchError("'filters' must be an object.")
    unknown = set(filters) - set(FILTER_KEYS)
    if unknown:
        raise SearchError(f"Unknown filter(s) {sorted(unknown)}; allowed: {', '.join(FILTER_KEYS)}.")
    clean = {}
    if "kb" in filters:
        kbs = filters["kb"] if isinstance(filters["kb"], list) else [filters["kb"]]
        _check_count("kb", kbs)
        if not all(isinstance(k, str) and k for k in kbs):
            raise SearchError("'filters.kb' must be a list of knowledge-base slugs.")
        clean["kb"] = kbs
    if "document_id" in filters:
        ids = filters["document_id"] if isinstance(filters["document_id"], list) else [filters["document_id"]]
        _check_count("document_id", ids)
        clean["document_id"] = [_document_id(i) for i in ids]
    for key in ("user_id", "session_id", "agent_id", "group_id", "run_id", "participant"):
        if key in filters:
            if not isinstance(filters[key], str) or len(filters[key]) > 200:
                raise SearchError(f"'filters.{key}' must be a string of at most 200 characters.")
            clean[key] = filters[key]
    if "valid_at" in filters:
        clean["valid_at"] = _valid_at(filters["valid_at"])
    if "metadata" in filters:
        clean["metadata"] = metadata_conditions(filters["metadata"])
    neighbours = data.get("neighbours", 0)
    if isinstance(neighbours, bool) or not isinstance(neighbours, int) or not 0 <= neighbours <= MAX_NEIGHBOURS:
        raise SearchError(f"'neighbours' must be an integer from 0 to {MAX_NEIGHBOURS}.")
    rerank = data.get("rerank")
    if rerank is not None and not isinstance(rerank, bool):
        raise SearchError("'rerank' must be true or false.")
    reference_time = _reference_time(data["reference_time"]) if data.get("reference_time") is not None else None
    return SearchRequest(
        query=query.strip(),
        method=method,
        memory_types=list(dict.fromkeys(memory_types)),
        filters=clean,
        top_k=top_k,
        expand_context=bool(data.get("expand_context", False)) or neighbours > 0,
        neighbours=neighbours,
        rerank=rerank,
        reference_time=reference_time,
    )


def _check_count(key: str, values: list) -> None:
    if len(values) > MAX_FILTER_VALUES:
        raise SearchError(f"'filters.{key}' holds {len(values):,} values; at most {MAX_FILTER_VALUES:,} are allowed.")


def metadata_conditions(value) -> dict:
    """'filters.metadata' checked: {key: value | [values] | {"eq"|"in"|"gt"|"gte"|"lt"|"lte": …}}, as
    {key: {op: value or list}} (every condition must hold)."""
    if not isinstance(value, dict) or not value:
        raise SearchError("'filters.metadata' must be a non-empty object, e.g. {\"category\": \"travel\", "
                          "\"chapter\": {\"gte\": 3}}.")
    if len(value) > user_metadata.MAX_KEYS:
        raise SearchError(f"'filters.metadata' names at most {user_metadata.MAX_KEYS} keys.")
    clean = {}
    try:
        for key, wanted in value.items():
            user_metadata.check_key(key, "filters.metadata")
            if isinstance(wanted, dict):
                if not wanted or any(op not in METADATA_OPS for op in wanted):
                    raise SearchError(f"'filters.metadata.{key}' takes the operators {', '.join(METADATA_OPS)}.")
                ops = dict(wanted)
            elif isinstance(wanted, list):
                ops = {"in": wanted}
            else:
                ops = {"eq": wanted}
            checked = {}
            for op, operand in ops.items():
                if METADATA_OPS[op] == "in":
                    values = operand if isinstance(operand, list) else [operand]
                    if not values or len(values) > MAX_METADATA_IN:
                        raise SearchError(f"'filters.metadata.{key}' lists 1 to {MAX_METADATA_IN} values.")
                    checked[op] = [user_metadata.check_value(v, "filters.metadata") for v in values]
                else:
                    number = user_metadata.check_value(operand, "filters.metadata")
                    if isinstance(number, str):
                        raise SearchError(f"'filters.metadata.{key}.{op}' must be a number.")
                    checked[op] = number
            clean[key] = checked
    except user_metadata.MetadataError as exc:
        raise SearchError(str(exc)) from None
    return clean


def index_conditions(metadata: dict) -> tuple[MetadataCondition, ...]:
    """The parsed 'filters.metadata' as index conditions."""
    return tuple(MetadataCondition(key, METADATA_OPS[op], tuple(v) if isinstance(v, list) else (v,))
                 for key, ops in metadata.items() for op, v in ops.items())


def _document_id(value) -> int:
    """A document id as an int: a JSON integer or a string of digits, within the database's range."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip()) if len(value.strip()) <= 20 else MAX_DOCUMENT_ID + 1
    else:
        raise SearchError("'filters.document_id' must be a list of integers.")
    if not 1 <= number <= MAX_DOCUMENT_ID:
        raise SearchError(f"'filters.document_id' values must be integers from 1 to {MAX_DOCUMENT_ID}.")
    return number


def _aware_datetime(value) -> datetime | None:
    """An ISO 8601 date or date-time of at most 40 characters as an aware datetime (UTC when it names
    no zone); None when it is not one."""
    if not (isinstance(value, str) and len(value) <= 40):
        return None
    try:
        at = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        at = at if at.tzinfo else at.replace(tzinfo=timezone.utc)
        utc = at.astimezone(timezone.utc)  # year 1 east of UTC, or 9999 west of it, has no UTC time
    except (ValueError, OverflowError):
        return None
    # Relative dates resolved against it step a year or so either way ("next year", "last month").
    return at if MIN_YEAR <= utc.year <= MAX_YEAR else None


def _reference_time(value) -> datetime:
    """'reference_time' as an aware datetime (UTC when it names no zone)."""
    at = _aware_datetime(value)
    if at is None:
        raise SearchError("'reference_time' must be an ISO 8601 date or date-time from the year "
                          f"{MIN_YEAR} to {MAX_YEAR}, e.g. \"2023-05-30T18:44:00Z\".")
    return at


def _valid_at(value) -> str:
    """'filters.valid_at' (foresight whose window holds then) as the UTC ISO text windows are stored in."""
    at = _aware_datetime(value)
    if at is None:
        raise SearchError("'filters.valid_at' must be an ISO 8601 date or date-time from the year "
                          f"{MIN_YEAR} to {MAX_YEAR}, e.g. \"2023-06-15\".")
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
