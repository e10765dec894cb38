"""Queue again the work a dead worker or a lost message left behind. Every worker and `up` run it.

A broker cannot be trusted to re-deliver: the filesystem broker (the embedded default) deletes a
message file when a worker fetches it, so a worker killed mid-stage takes its message, and those it
had prefetched, with it; Redis re-delivers only after its visibility timeout (an hour by default).
The database knows better. Two kinds of documents are queued again:

- a stage whose lease ran out (its holder stopped renewing it: killed, frozen, cut off). Its claim is
  released with a conditional update on the dead claim's token, so of several sweepers one wins
  and a holder that wakes up later finds its writes refused;
- a document waiting for its next stage (no claim) that has not moved for
  LOCI_STALLED_QUEUE_SECONDS: its message may be lost. A second message is harmless: the first to
  claim the stage runs it, the other finds it taken.
"""

import logging
import threading

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Q
from django.utils import timezone

from ingest import worker_liveness
from ingest.tasks import STAGE_OF_STATUS, STAGES, process_document_stage
from memory.models import Document

log = logging.getLogger(__name__)
Status = Document.Status
_started: threading.Thread | None = None
_stop = threading.Event()
_start_lock = threading.Lock()


def sweep() -> dict[str, list[int]]:
    """Queue again every stalled stage; returns the document ids queued, by reason."""
    now = timezone.now()
    expired_before = now - timezone.timedelta(seconds=settings.LOCI_STAGE_LEASE_SECONDS)
    waiting_before = now - timezone.timedelta(seconds=settings.LOCI_STALLED_QUEUE_SECONDS)
    requeued: dict[str, list[int]] = {"lease expired": [], "message lost": []}

    running = Q(status__in=list(STAGE_OF_STATUS), claim_token__isnull=False) | Q(status=Status.INDEXING)
    for pk, status, token in (Document.objects.filter(running, updated_at__lt=expired_before)
                              .values_list("pk", "status", "claim_token")[:500]):
        stage_name = STAGE_OF_STATUS[status]
        stage = STAGES[stage_name]
        # Back to the state the previous stage left behind, under no claim: the stage runs again
        # from its start (its writes are idempotent replaces) for whichever message claims it first.
        released = Document.objects.filter(pk=pk, status=status, claim_token=token,
                                           updated_at__lt=expired_before).update(
            status=stage.previous, claim_token=None, stage=f"{stage_name} again: its worker stopped",
            updated_at=now)
        if released and _send(pk, stage_name):
            requeued["lease expired"].append(pk)

    next_stage = {Status.QUEUED: "parse", Status.PARSING: "extract", Status.EXTRACTING: "index"}
    for pk, status, moved in (Document.objects.filter(status__in=list(next_stage), claim_token__isnull=True,
                                                      updated_at__lt=waiting_before)
                              .values_list("pk", "status", "updated_at")[:500]):
        # Touching updated_at (conditionally) makes this the one sweeper that sends, for this period.
        if Document.objects.filter(pk=pk, status=status, claim_token__isnull=True, updated_at=moved).update(
                updated_at=now) and _send(pk, next_stage[status]):
            requeued["message lost"].append(pk)

    for reason, ids in requeued.items():
        if ids:
            log.warning("sweeper: queued %d document(s) again (%s): %s", len(ids), reason, ids[:20])
    _warn_if_no_worker_is_live()
    return requeued


def _warn_if_no_worker_is_live() -> None:
    """Queuing again helps only if a worker takes the messages: say so when none of this machine's does."""
    workers = worker_liveness.read_workers()
    if workers and not any(w["status"] in (worker_liveness.IDLE, worker_liveness.BUSY) for w in workers):
        log.error("sweeper: no worker on this machine makes progress (%s); queued documents wait until one does",
                  ", ".join(f"{w['hostname']}: {w['status']}" for w in workers))


def _send(document_id: int, stage_name: str) -> bool:
    try:
        process_document_stage.delay(document_id, stage_name)
        return True
    except Exception:  # broker down: the document stays as it is and the next sweep tries again
        log.exception("sweeper: could not queue document %s (%s)", document_id, stage_name)
        return False


def run_forever(interval: float, stop: threading.Event) -> None:
    while True:
        try:
            sweep()
        except DatabaseError as exc:
            log.warning("sweeper: database unavailable (%s); trying again in %.0fs", exc, interval)
            connection.close()
        except Exception:  # never let one bad sweep end the thread
            log.exception("sweeper: sweep failed")
        if stop.wait(interval):
            return


def start_sweeper_in_worker(sender=None, **kwargs) -> None:
    """Celery's worker_ready receiver (connected in IngestConfig.ready)."""
    # In the worker's main process, not its pool children: one sweeper per worker, whose lifetime
    # is the worker's. A killed worker's documents are swept by the next worker (or `up`) to run.
    start_sweeper()


def stop_sweeper_in_worker(sender=None, **kwargs) -> None:
    """Celery's worker_shutdown receiver: the sweep under way ends, no other starts."""
    stop_sweeper()


def start_sweeper(interval: float | None = None) -> threading.Thread:
    """Start this process's sweeper thread (once; later calls return the running one)."""
    global _started
    with _start_lock:
        if _started is None or not _started.is_alive():
            every = settings.LOCI_SWEEP_INTERVAL_SECONDS if interval is None else interval
            _stop.clear()
            _started = threading.Thread(target=run_forever, args=(every, _stop), name="loci-sweeper", daemon=True)
            _started.start()
            log.info("sweeper: checking for stalled documents every %ss", every)
        return _started


def stop_sweeper(timeout: float | None = 30) -> bool:
    """Stop this process's sweeper thread, after the sweep under way; False if it is still sweeping
    after `timeout` seconds (it stops when that sweep ends). True when none was running."""
    with _start_lock:
        thread = _started
        _stop.set()
    if thread is None:
        return True
    thread.join(timeout)
    return not thread.is_alive()
