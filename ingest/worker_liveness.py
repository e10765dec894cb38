"""Each Celery worker's heartbeat: a small JSON file per worker that `up`, `/healthz` and the sweeper read.

A worker whose main process lives can still do nothing (issue 30: a prefork pool wedged on its pipe's
read lock received every message and handed none out), so "the process exists" proves nothing. The
beat is written by the worker's consumer timer (on Redis and RabbitMQ it runs in the consumer's own
event loop, so a loop that stops stops the beat), and around each task: `busy_since` says since when
a task holds it (a solo worker's loop does not run while its task does).

A worker is `stale` when it beat no more than LOCI_WORKER_STALE_SECONDS ago while idle, or has held
one task longer than CELERY_TASK_TIME_LIMIT (plus that margin): `up` then kills and restarts it.
Files live under LOCI_RUN_DIR/workers (one machine's workers; a worker on another machine writes
its own). A worker that exits cleanly removes its file; `up` removes the file of a child it restarts.
"""

import json
import logging
import os
import signal
import socket
import threading
import time
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

log = logging.getLogger(__name__)
IDLE, BUSY, STALE, GONE = "idle", "busy", "stale", "gone"
_lock = threading.Lock()
_state: dict = {}
_solo_pid: int | None = None  # the pid of a solo-pool worker, which runs its tasks in its main thread


def heartbeat_dir() -> Path:
    return Path(settings.LOCI_RUN_DIR) / "workers"


def heartbeat_path(hostname: str) -> Path:
    return heartbeat_dir() / f"{hostname.replace('/', '_')}.json"


def _write() -> None:
    path = heartbeat_path(_state["hostname"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**_state, "beat_at": time.time()}))
    os.replace(tmp, path)  # a reader never sees half a file


def beat() -> None:
    with _lock:
        if _state:
            try:
                _write()
            except OSError as exc:  # a full disk must not stop the worker; the beat just goes stale
                log.warning("worker heartbeat: cannot write %s: %s", heartbeat_path(_state["hostname"]), exc)


def on_worker_ready(sender=None, **kwargs) -> None:
    """Celery's worker_ready receiver (in the worker's main process): start beating."""
    global _solo_pid
    consumer = sender
    hostname = consumer.hostname
    pool = type(getattr(consumer, "pool", None)).__module__
    if pool.endswith(".solo"):
        _solo_pid = os.getpid()
    with _lock:
        _state.update(hostname=hostname, pid=os.getpid(), machine=socket.gethostname(), pool=pool.rsplit(".", 1)[-1],
                      state=IDLE, busy_since=None, task=None, started_at=time.time())
    beat()
    consumer.timer.call_repeatedly(settings.LOCI_WORKER_HEARTBEAT_SECONDS, beat)


def on_task_prerun(task_id=None, task=None, args=None, **kwargs) -> None:
    if os.getpid() != _solo_pid:
        return  # a prefork child: its parent's file speaks for the worker
    with _lock:
        _state.update(state=BUSY, busy_since=time.time(), task=f"{task.name.rsplit('.', 1)[-1]}{tuple(args or ())}")
    beat()
    _arm_soft_time_limit(settings.CELERY_TASK_SOFT_TIME_LIMIT)


def on_task_postrun(**kwargs) -> None:
    if os.getpid() != _solo_pid:
        return
    _arm_soft_time_limit(0)
    with _lock:
        _state.update(state=IDLE, busy_since=None, task=None)
    beat()


def on_worker_shutdown(**kwargs) -> None:
    with _lock:
        if _state:
            heartbeat_path(_state["hostname"]).unlink(missing_ok=True)
            _state.clear()


def _arm_soft_time_limit(seconds: float) -> None:
    """The solo pool enforces no time limit: raise SoftTimeLimitExceeded in the task after `seconds`.

    A solo worker runs its task in the main thread, where Python runs signal handlers, so the stage
    fails with its "took too long" reason exactly as under prefork. The hard limit is `up`'s: it kills
    a worker busy longer than CELERY_TASK_TIME_LIMIT (see `stale`).
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if seconds:
        signal.signal(signal.SIGALRM, _soft_time_limit_reached)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _soft_time_limit_reached(signum, frame):
    raise SoftTimeLimitExceeded()


def connect(signals) -> None:
    """Connect the receivers (IngestConfig.ready)."""
    signals.worker_ready.connect(on_worker_ready, dispatch_uid="ingest.worker_liveness.ready")
    signals.task_prerun.connect(on_task_prerun, dispatch_uid="ingest.worker_liveness.prerun")
    signals.task_postrun.connect(on_task_postrun, dispatch_uid="ingest.worker_liveness.postrun")
    signals.worker_shutdown.connect(on_worker_shutdown, dispatch_uid="ingest.worker_liveness.shutdown")


# --- Reading


def status_of(record: dict, now: float | None = None) -> str:
    """IDLE, BUSY, STALE (beats stopped, or one task held past the hard time limit) or GONE (process dead)."""
    now = time.time() if now is None else now
    if record.get("machine") == socket.gethostname() and not _pid_alive(record.get("pid")):
        return GONE
    stale_after = settings.LOCI_WORKER_STALE_SECONDS
    if record.get("state") == BUSY and record.get("busy_since"):
        return STALE if now - record["busy_since"] > settings.CELERY_TASK_TIME_LIMIT + stale_after else BUSY
    return STALE if now - record.get("beat_at", 0) > stale_after else IDLE


def read_workers(now: float | None = None) -> list[dict]:
    """Every heartbeat file of this machine's run dir, with its `status` and ages in seconds."""
    now = time.time() if now is None else now
    workers = []
    for path in sorted(heartbeat_dir().glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # removed or replaced while we read it
        workers.append({
            "hostname": record.get("hostname"), "pid": record.get("pid"), "status": status_of(record, now),
            "beat_age_s": round(now - record.get("beat_at", now), 1),
            "busy_s": round(now - record["busy_since"], 1) if record.get("busy_since") else None,
            "task": record.get("task"),
        })
    return workers


def read_record(hostname: str) -> dict | None:
    try:
        return json.loads(heartbeat_path(hostname).read_text())
    except (OSError, ValueError):
        return None


def forget(hostname: str) -> None:
    heartbeat_path(hostname).unlink(missing_ok=True)


def _pid_alive(pid) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
