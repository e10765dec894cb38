"""Prometheus metrics: what the pipeline, search and embedders record, and what a scrape reads.

Counters and histograms are prometheus_client's multiprocess files under LOCI_METRICS_DIR (settings
point PROMETHEUS_MULTIPROC_DIR there before this module is imported), so the web server's /metrics
sums every process of one installation: each uvicorn worker, each Celery pool process, and
management commands such as `ingest --wait`. State (documents per status, stalled documents, index
rows) is read from the database and the indexes at scrape time instead: it is the same whichever
process answers, and a dead process cannot leave a stale gauge behind.

Hooks, one line each: `timed_step` (ingest/tasks.py), `timed_search` (retrieval/search),
`metered_embedder` (retrieval/embeddings); the LLM series are written by common/llm.py.
"""

import functools
import hmac
import logging
import time

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest,
                               values)
from prometheus_client.multiprocess import MultiProcessCollector

log = logging.getLogger(__name__)

# Stages run from well under a second (extract) to the 30-minute task limit (OCR, embedding a book).
_STAGE_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800)
# Searches: a few ms (keyword) to SEARCH_ENGINE_TIMEOUT_SECONDS (15 s by default) and agentic's LLM calls.
_SEARCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60)

STAGE_SECONDS = Histogram(
    "loci_ingest_stage_duration_seconds", "Time a claimed ingestion stage ran, by its outcome.",
    ["stage", "outcome"], buckets=_STAGE_BUCKETS,
)
STAGE_FAILURES = Counter(
    "loci_ingest_stage_failures", "Ingestion stages that ended in an error: failed (the document is marked "
    "failed), timeout (its time limit), transient (retried with backoff).", ["stage", "kind"],
)
SEARCH_SECONDS = Histogram(
    "loci_search_duration_seconds", "Search latency by requested method; outcome error is a refused or "
    "failed search (400, 503, 504).", ["method", "outcome"], buckets=_SEARCH_BUCKETS,
)
EMBEDDED_TEXTS = Counter(
    "loci_embedding_texts", "Texts the embedding model computed (cache hits excluded).", ["embedder", "kind"])
EMBEDDING_SECONDS = Counter(
    "loci_embedding_seconds", "Seconds the embedding model spent; texts / seconds is its throughput.",
    ["embedder", "kind"],
)
# LLM steps: a request is a few hundred ms (a small local model) to LLM_TIMEOUT (60 s by default).
_LLM_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
LLM_CALLS = Counter(
    "loci_llm_calls", "Chat-model calls by step and outcome: ok (an answer, usable or not), error (a failed or "
    "refused request), breaker_open, deadline, budget (not sent: the rules answered).", ["step", "outcome"],
)
LLM_ERRORS = Counter(
    "loci_llm_errors", "Failed chat-model requests by kind: timeout, connection, http_429, http_5xx, http_4xx, "
    "overflow (the prompt exceeds the model's context).", ["step", "kind"],
)
LLM_SECONDS = Histogram(
    "loci_llm_call_duration_seconds", "Time one chat-model request took, failed ones included.", ["step"],
    buckets=_LLM_BUCKETS,
)
LLM_TOKENS = Counter("loci_llm_tokens", "Tokens the chat model reported (usage), by step: prompt or completion.",
                     ["step", "kind"])
# Per process (each learns on its own); the most recent change across processes is what a scrape shows.
LLM_BREAKER_OPEN = Gauge("loci_llm_breaker_open", "1 while the endpoint's circuit breaker is open (until a trial "
                         "call succeeds), 0 once closed.", ["endpoint"], multiprocess_mode="mostrecent")


# --- Hooks ---------------------------------------------------------------------------------------

def timed_step(stage_name: str, step, *, transient, timeout: type, lost: type):
    """The stage's step, timed and its failures counted (a step runs only once its stage is claimed).

    `transient(exc)` tells an engine outage (retried) from a failure; `lost` is the exception of a
    stage whose claim was taken over (it stops without failing the document)."""
    @functools.wraps(step)
    def timed(document):
        started, outcome = time.perf_counter(), "failed"
        try:
            result = step(document)
            outcome = "ok"
            return result
        except lost:
            outcome = "lost"
            raise
        except timeout:
            outcome = "timeout"
            raise
        except Exception as exc:
            outcome = "transient" if transient(exc) else "failed"
            raise
        finally:
            STAGE_SECONDS.labels(stage_name, outcome).observe(time.perf_counter() - started)
            if outcome != "ok":
                STAGE_FAILURES.labels(stage_name, outcome).inc()

    return timed


def timed_search(search):
    """Wrap the one search function: latency per requested method (validated, so a bounded label set)."""
    @functools.wraps(search)
    def timed(scope, req, **options):
        started, outcome = time.perf_counter(), "error"
        try:
            response = search(scope, req, **options)
            outcome = "ok"
            return response
        finally:
            SEARCH_SECONDS.labels(req.method, outcome).observe(time.perf_counter() - started)

    return timed


class MeteredEmbedder:
    """An embedding provider whose calls are counted; it sits under the cache, so only real work counts."""

    def __init__(self, inner):
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts):
        started = time.perf_counter()
        vectors = self.inner.embed_documents(texts)
        self._record("document", len(texts), started)
        return vectors

    def embed_query(self, text):
        started = time.perf_counter()
        vector = self.inner.embed_query(text)
        self._record("query", 1, started)
        return vector

    def _record(self, kind: str, texts: int, started: float) -> None:
        EMBEDDED_TEXTS.labels(self.inner.name, kind).inc(texts)
        EMBEDDING_SECONDS.labels(self.inner.name, kind).inc(time.perf_counter() - started)

    def __getattr__(self, attribute):  # close(), or a provider's own extras
        return getattr(self.inner, attribute)


def metered_embedder(provider):
    return MeteredEmbedder(provider)


# --- State read at scrape time -------------------------------------------------------------------
# Collectors of what the database and the indexes hold live with the apps that own those (this module
# is below them): retrieval.metrics_state registers its collector here from RetrievalConfig.ready().
_state_collectors: list = []


def register_state(collector) -> None:
    if all(type(c) is not type(collector) for c in _state_collectors):
        _state_collectors.append(collector)


# --- Exposition ----------------------------------------------------------------------------------

def exposition() -> bytes:
    """Every process's counters and histograms, and the state gauges, in the Prometheus text format."""
    registry = CollectorRegistry()
    if values.ValueClass is values.MutexValue:  # prometheus_client was imported before settings set the dir
        from prometheus_client import REGISTRY

        registry = REGISTRY  # this process only
        log.warning("metrics: multiprocess mode is off; /metrics shows this process only")
    else:
        MultiProcessCollector(registry, path=str(settings.LOCI_METRICS_DIR))
    state = CollectorRegistry(auto_describe=False)
    for collector in _state_collectors:
        state.register(collector)
    return generate_latest(registry) + generate_latest(state)


def clear_files() -> int:
    """Remove the counters of earlier runs (before `up` starts its processes); returns files removed.

    prometheus_client asks for a fresh folder per run: a new process whose pid an old one had would
    otherwise continue that process's file, and files of dead processes would pile up.
    """
    removed = 0
    for path in settings.LOCI_METRICS_DIR.glob("*.db"):
        path.unlink(missing_ok=True)
        removed += 1
    return removed


TENANT_KEY_PREFIX = "loci_"  # tenants.models.ApiKey.PREFIX (loci imports no app)


@require_GET
def metrics_view(request):
    """GET /metrics: for a staff session, or `Authorization: Bearer $LOCI_METRICS_TOKEN`."""
    header = request.headers.get("Authorization", "")
    token = settings.LOCI_METRICS_TOKEN
    if header.startswith("Bearer ") and token and hmac.compare_digest(header[7:].strip().encode(), token.encode()):
        pass
    elif header.startswith(f"Bearer {TENANT_KEY_PREFIX}"):
        # A key's scope is one tenant; the metrics count every tenant's documents and searches.
        return _refused(401, "An API key is scoped to one tenant and cannot read /metrics, which covers the whole "
                             "installation; send Authorization: Bearer <LOCI_METRICS_TOKEN>.")
    elif header:
        return _refused(401, "The metrics token is wrong or not configured (LOCI_METRICS_TOKEN).")
    elif not request.user.is_authenticated:
        return _refused(401, "Sign in as staff or send Authorization: Bearer <LOCI_METRICS_TOKEN>.")
    elif not request.user.is_staff:
        return _refused(403, "Metrics are for staff users.")
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


def _refused(status: int, reason: str) -> JsonResponse:
    response = JsonResponse({"error": reason}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response
