"""Loading the models and opening the indexes when a process starts, not inside a search's deadline.

The embedding model takes seconds to load (more on a loaded machine); loaded lazily, the first
search of a process paid for it inside the engine deadline (`SEARCH_ENGINE_TIMEOUT_SECONDS`) and
could fail with "the embedding model did not answer". A serving process (the web server, each
worker process, `manage.py search`, `manage.py mcp`) calls `start()` as it starts, and a search
in a process that never did (a script, a shell) calls it first: one daemon
thread loads the embedder of the live build (one query embedded), the text analysis (jieba's
dictionary) and opens both indexes. A search that arrives meanwhile waits for it in `wait()`
before any engine call is started, so the deadline counts from a warm process; /healthz reports
`state()` ("warming" with the seconds so far, "ready", or "failed" with the error class).

`LOCI_WARM_START=0` in the environment turns it off (the test suite's in-process imports of the
ASGI app; a process that never searches).
"""

import gc
import logging
import os
import threading
import time

from django.conf import settings

from retrieval.backends import token_vectors
from retrieval.backends import keyword_index, vector_index
from retrieval.embeddings import embedder
from retrieval.search import multilingual, query_bridge
from retrieval.text import index_terms

log = logging.getLogger(__name__)

_lock = threading.Lock()
_state: dict = {}  # pid -> {"started": monotonic, "done": Event, "status", "seconds", "error"}


def enabled() -> bool:
    return os.environ.get("LOCI_WARM_START", "1").strip().lower() not in ("0", "false", "no", "off")


def start() -> None:
    """Begin warming this process, once (a forked child starts its own; the parent's thread is not there)."""
    if not enabled():
        return
    with _lock:
        if os.getpid() in _state:
            return
        entry = _state[os.getpid()] = {"started": time.monotonic(), "done": threading.Event(), "status": "warming"}
    threading.Thread(target=_warm, args=(entry,), name="loci-warmup", daemon=True).start()


def _warm(entry: dict) -> None:
    try:
        embedder().embed_query("warm-up")
        index_terms("warm-up 预热")
        vectors = vector_index()
        vectors.ping()
        getattr(vectors, "preload", lambda: None)()  # an in-process index reads its rows now, not at the first search
        keyword_index().ping()
        if settings.SEARCH_QUERY_BRIDGE:  # the dictionary: a second or two of parsing, not a search's
            query_bridge.dictionary()
        if settings.SEARCH_MULTILINGUAL_RERANK:  # its graph is built at first use: seconds of CPU, not a search's
            multilingual.model()
        if settings.SEARCH_LATE_INTERACTION:  # ColBERT: ~1 CPU-s (sha256 and sessions), for searches and chat ingestion
            token_vectors.model()
    except Exception as exc:  # the first search loads again and reports it; here it is only logged
        log.warning("warm-up failed: %s: %s", type(exc).__name__, exc)
        entry.update(status="failed", error=type(exc).__name__)
    else:
        entry["status"] = "ready"
    # What is loaded now (models, the indexes' rows, Django's and the libraries' modules) lives as
    # long as the process: out of the collector's sight, a full collection no longer walks it
    # (bench.latency's p99 held 62-74 ms pauses of the collector at 100k rows; frozen, 0.5 ms).
    gc.freeze()
    entry["seconds"] = round(time.monotonic() - entry["started"], 1)
    entry["done"].set()
    log.info("warm-up %s in %.1f s", entry["status"], entry["seconds"])


def ready() -> None:
    """Warm this process if it has not started (`start`), and wait for it to end (`wait`)."""
    start()
    wait()


def wait() -> None:
    """Block until this process's warm-up has ended (at most LOCI_WARMUP_WAIT_SECONDS); no-op without one."""
    entry = _state.get(os.getpid())
    if entry is not None and not entry["done"].is_set():
        entry["done"].wait(settings.LOCI_WARMUP_WAIT_SECONDS)


def state() -> dict | None:
    """{"status": "warming"|"ready"|"failed", "seconds": …} of this process; None when it never warmed."""
    entry = _state.get(os.getpid())
    if entry is None:
        return None
    out = {"status": entry["status"],
           "seconds": entry.get("seconds", round(time.monotonic() - entry["started"], 1))}
    if "error" in entry:
        out["error"] = entry["error"]
    return out
