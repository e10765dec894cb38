"""Which failures of a stage are worth retrying, and which engine to name when giving up on one.

A failure is *transient* when a service the stage depends on did not answer (refused connection,
timeout, 5xx, rate limit): the same call a little later may well succeed, as healthchecks marks a
transport error retryable. Everything else (an encrypted or corrupt file, a bug) fails the same way
every time, so retrying only delays the reason.
"""

import sqlite3
from dataclasses import dataclass

from django.conf import settings
from django.db import OperationalError

from ingest.parsing.base import TransientParseError
from loci.backends import DEFAULT_ALIAS, keyword_indexes, vector_indexes

# Milvus's own codes for "not now": 2 = cannot connect (pymilvus, server down or restarting),
# 8 = rate limited. Other codes (bad expression, schema mismatch) are permanent.
_MILVUS_TRANSIENT_CODES = {2, 8}
_MILVUS_TRANSIENT_WORDS = ("server unavailable", "unavailable", "deadline exceeded", "connection refused")
_HTTP_TRANSIENT_STATUSES = {408, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class Outage:
    """A transient failure and the engine that caused it, named for a user ("The vector index (…)")."""

    engine: str
    error: BaseException

    def reason(self, waited_seconds: float) -> str:
        return f"{self.engine} did not answer for {_duration(waited_seconds)}: {_describe(self.error)}"


def outage_of(exc: BaseException) -> Outage | None:
    """The outage an exception reports (looking through its causes), or None when retrying cannot help."""
    seen = 0
    while exc is not None and seen < 6:
        engine = _transient_engine(exc)
        if engine:
            return Outage(engine, exc)
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _transient_engine(exc: BaseException) -> str | None:
    module = type(exc).__module__ or ""
    if module.startswith("pymilvus") or module.startswith("grpc"):
        return vector_engine() if _milvus_transient(exc) else None
    if module.startswith("opensearchpy"):
        status = getattr(exc, "status_code", None)
        connection = type(exc).__name__ in ("ConnectionError", "ConnectionTimeout")
        return keyword_engine() if connection or status in _HTTP_TRANSIENT_STATUSES else None
    if module.startswith("openai"):
        import openai

        transient = isinstance(exc, (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError))
        return embedding_engine() if transient else None
    if type(exc).__name__ == "EmbeddingError" and str(exc).startswith("every embedder failed"):
        return embedding_engine()  # primary and fallback both failed: at least one is a remote server
    if isinstance(exc, OperationalError):
        return "The database"
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc)):
        return keyword_engine()
    if isinstance(exc, TransientParseError):
        return exc.engine
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return "A service the stage depends on"
    return None


def _milvus_transient(exc: BaseException) -> bool:
    if type(exc).__name__ == "MilvusUnavailableException":
        return True
    code = getattr(exc, "code", None)
    if callable(code):  # grpc.RpcError: code() is a StatusCode
        return getattr(code(), "name", "") in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED")
    message = str(getattr(exc, "message", "") or exc).lower()
    return code in _MILVUS_TRANSIENT_CODES or any(word in message for word in _MILVUS_TRANSIENT_WORDS)


def vector_engine() -> str:
    # Through the backend handler, as the index itself is built: a settings module may name aliases.
    backend = vector_indexes.settings[DEFAULT_ALIAS]["BACKEND"]
    options = vector_indexes.options(DEFAULT_ALIAS)
    if "milvus" not in backend.lower():
        return f"The vector index ({backend.rsplit('.', 1)[-1]})"
    if options.get("uri"):
        return f"The vector index (Milvus at {options['uri']})"
    if options.get("lite_port"):
        return f"The vector index (Milvus Lite at 127.0.0.1:{options['lite_port']})"
    return f"The vector index (Milvus Lite over {options.get('lite_path')})"  # its port is picked at start


def keyword_engine() -> str:
    backend = keyword_indexes.settings[DEFAULT_ALIAS]["BACKEND"]
    options = keyword_indexes.options(DEFAULT_ALIAS)
    if "opensearch" in backend.lower():
        return f"The keyword index (OpenSearch at {options.get('url')})"
    return f"The keyword index ({backend.rsplit('.', 1)[-1]})"


def embedding_engine() -> str:
    url = getattr(settings, "EMBEDDING_BASE_URL", "")
    return f"The embedding server ({url})" if url else "The embedding server"


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}"[:600] if text else type(exc).__name__


def _duration(seconds: float) -> str:
    if seconds >= 90:
        return f"{seconds / 60:.0f} min"
    return f"{max(1, round(seconds))} s"
