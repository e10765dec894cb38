"""GET /healthz: can this process reach its database, broker and both indexes? No auth, a few seconds at most.

200 {"status": "ok", "checks": {...}} when every check passes, else 503 with "failing" naming the
checks that did not; "embedder" says when the indexes hold another model's vectors than the
configured embedder and what to run (model names only). A failure is reported by exception class
only: the body is public, and engine errors can carry hosts or credentials. The full error goes to the log.
"""

import logging
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import connection, connections
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ingest import worker_liveness
from loci.supervision import RESTARTING, read_state
from retrieval import warmup
from retrieval.backends import index_upgrade
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter
from retrieval.embeddings import identity
from tenants.forwarded import untrusted_forwarding_notice

log = logging.getLogger(__name__)

# docker-compose.yml gives the whole request 10 s. The checks run side by side, so the answer takes
# at most about this long. A process's first check also imports and connects each index client
# (1-2 s, more on a loaded machine); later checks take milliseconds.
CHECK_TIMEOUT_SECONDS = 5.0


def check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def check_broker() -> None:
    from kombu import Connection

    # A fresh connection from settings (the same ones loci/celery.py gives the app), so a broken
    # broker is seen now rather than through a pooled connection that happens to still be open.
    with Connection(
        settings.CELERY_BROKER_URL,
        transport_options=dict(settings.CELERY_BROKER_TRANSPORT_OPTIONS or {}),
        connect_timeout=CHECK_TIMEOUT_SECONDS,
    ) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=CHECK_TIMEOUT_SECONDS)


def check_vector_index() -> None:
    _probe(vector_index())


def check_keyword_index() -> None:
    _probe(keyword_index())


def _probe(index) -> None:
    ping = getattr(index, "ping", None)
    if callable(ping):
        ping()
        return
    # No tenant or knowledge base has id 0: this asks the engine a real question and reads nothing.
    index.count(IndexFilter(tenant_id=0, kb_ids=(0,)))


CHECKS = {
    "database": check_database,
    "broker": check_broker,
    "vector_index": check_vector_index,
    "keyword_index": check_keyword_index,
}


@never_cache
@require_GET
def healthz(request):
    results = run_checks(CHECKS, timeout=CHECK_TIMEOUT_SECONDS)
    failing = [name for name, result in results.items() if result["status"] != "ok"]
    body = {"status": "fail" if failing else "ok", "checks": results}
    if failing:
        body["failing"] = failing
    try:
        notice = identity.notice()
    except Exception as exc:  # a misconfigured embedder is for the log; the checks above are the answer
        log.warning("health: cannot compare the configured embedder with the live build's: %s", exc)
        notice = None
    if notice:  # still serving (with the build's own model), so not a failure: what to run
        body["embedder"] = notice
    for kind in ("vector", "keyword"):
        try:
            upgrade = index_upgrade.notice(kind)
        except Exception as exc:  # the checks above report an unreachable index; this is advice only
            log.warning("health: cannot tell whether the %s index awaits its move into the embedded default: %s",
                        kind, exc)
            upgrade = None
        if upgrade:  # the other kind of search still answers, so not a failure: what to run
            body[f"{kind}_index_upgrade"] = upgrade
    warm = warmup.state()
    if warm is not None:  # "warming": searches arriving now wait for the model (outside their deadline)
        body["warmup"] = warm
    body.update(worker_report())
    proxy = _quietly(untrusted_forwarding_notice)
    if proxy:  # a warning, not a failure: requests are served, but throttling cannot tell clients apart
        body["proxy"] = proxy
    if body.get("workers_live") == 0:  # workers are expected here and none makes progress: ingestion stopped
        body["status"] = "fail"
        body.setdefault("failing", []).append("workers")
    return JsonResponse(body, status=503 if body["status"] == "fail" else 200)


def _quietly(read):
    try:
        return read()
    except Exception as exc:  # the cache down is for the log; the checks above are the answer
        log.warning("health: %s failed: %s", read.__name__, exc)
        return None


def worker_report() -> dict:
    """This machine's workers (their heartbeats) and `up`'s children: what runs, what is restarting.

    `workers_live` (idle or busy) is given only when some worker is expected here (a heartbeat file,
    or `up` runs workers); workers that run only on other machines are not seen from this one.
    """
    report = {}
    workers = worker_liveness.read_workers()
    up = read_state(Path(settings.LOCI_RUN_DIR) / "up.json")
    if workers:
        report["workers"] = workers
    if up:
        report["processes"] = up["children"]
        report["restarting"] = [child["name"] for child in up["children"] if child["state"] == RESTARTING]
    children = (up or {}).get("children", ())
    expects_workers = bool(workers) or any(child["name"].startswith("worker") for child in children)
    if expects_workers:
        report["workers_live"] = sum(w["status"] in (worker_liveness.IDLE, worker_liveness.BUSY) for w in workers)
    return report


def run_checks(checks: dict, *, timeout: float) -> dict:
    """Run every check in its own daemon thread; one that has not answered within `timeout` fails.

    A thread that hangs (a firewall dropping packets, say) is left behind rather than joined: it
    holds no lock, and the next request starts fresh threads.
    """
    results: dict[str, dict] = {}
    threads = []
    for name, check in checks.items():
        thread = threading.Thread(target=_run_one, args=(name, check, results), name=f"healthz-{name}", daemon=True)
        thread.start()
        threads.append((name, thread))
    deadline = time.monotonic() + timeout
    for name, thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return {
        name: dict(results[name]) if name in results else {"status": "fail", "error": f"no answer within {timeout:g}s"}
        for name, _ in threads
    }


def _run_one(name, check, results) -> None:
    started = time.monotonic()
    try:
        check()
    except Exception as exc:
        log.warning("health check %s failed: %s: %s", name, type(exc).__name__, exc)
        results[name] = {"status": "fail", "error": type(exc).__name__, "ms": _ms(started)}
    else:
        results[name] = {"status": "ok", "ms": _ms(started)}
    finally:
        # Django opens a connection per thread; this thread's must not outlive it.
        connections.close_all()


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
