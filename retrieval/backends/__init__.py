"""The configured index projections, loaded once per process like Django's CACHES.

`vector_index()` and `keyword_index()` build the backend named by LOCI_VECTOR_INDEX /
LOCI_KEYWORD_INDEX (`BACKEND` dotted path, `OPTIONS` dict) on first use. The checks every
backend applies to its arguments (filters, rows, top_k) live here so they are the same everywhere.
"""

import numbers
import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from retrieval.backends.base import KINDS, IndexFilter, IndexRow, KeywordIndex, VectorIndex

_SETTINGS = ("LOCI_VECTOR_INDEX", "LOCI_KEYWORD_INDEX")
_instances: dict[str, object] = {}
_lock = threading.Lock()


def _load(setting: str):
    with _lock:
        if setting not in _instances:
            _instances[setting] = _build(setting, getattr(settings, setting, None))
        return _instances[setting]


def _build(setting: str, conf):
    if not isinstance(conf, dict) or not isinstance(conf.get("BACKEND"), str):
        raise ImproperlyConfigured(f"{setting} must be a dict with a BACKEND dotted path.")
    options = conf.get("OPTIONS", {})
    if not isinstance(options, dict):
        raise ImproperlyConfigured(f"{setting}['OPTIONS'] must be a dict.")
    try:
        backend = import_string(conf["BACKEND"])
    except ImportError as exc:
        raise ImproperlyConfigured(f"{setting}: cannot import {conf['BACKEND']!r}: {exc}") from exc
    return backend(dict(options))


def vector_index() -> VectorIndex:
    """The process-wide vector index."""
    return _load("LOCI_VECTOR_INDEX")


def keyword_index() -> KeywordIndex:
    """The process-wide keyword index."""
    return _load("LOCI_KEYWORD_INDEX")


def reset_backends() -> None:
    """Close and forget the loaded backends; the next call builds them again from settings."""
    with _lock:
        instances = list(_instances.values())
        _instances.clear()
    for instance in instances:
        close = getattr(instance, "close", None)
        if close:
            close()


@receiver(setting_changed)
def _reset_on_setting_change(*, setting, **kwargs):
    if setting in _SETTINGS:
        reset_backends()


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
    )


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
        for name in ("text", "parent_id", "status", "user_id", "session_id"):
            _str(getattr(row, name), name)
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
