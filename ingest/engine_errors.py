"""Which failures of a stage are worth retrying, and which engine to name when giving up on one.

A failure is *transient* when a service the stage depends on did not answer (refused connection,
timeout, 5xx, rate limit): the same call a little later may well succeed, as healthchecks marks a
transport error retryable. Everything else (an encrypted or corrupt file, a bug) fails the same way
every time, so retrying only delays the reason. Which errors are transient is each engine's own
knowledge: an index backend's `transient` (retrieval/backends/base.py), an embedding provider's
EmbeddingError.transient, a parser's TransientParseError.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import OperationalError

from ingest.parsing.base import TransientParseError
from retrieval.backends import transient_engine
from retrieval.embeddings import EmbeddingError


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
    if isinstance(exc, OperationalError):  # Django's: the database did not answer
        return "The database"
    engine = transient_engine(exc)  # each index backend knows its own engine's errors (retrieval.backends)
    if engine:
        return engine
    if isinstance(exc, EmbeddingError) and exc.transient:  # as the embedding provider said
        return embedding_engine()
    if isinstance(exc, TransientParseError):
        return exc.engine
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return "A service the stage depends on"
    return None


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
