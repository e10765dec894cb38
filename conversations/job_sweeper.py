"""Every worker (and `up`) sends again, every LOCI_SWEEP_INTERVAL_SECONDS, the extraction jobs a dead
worker or a lost message left behind, as ingest/sweeper.py does for documents (which may not import
conversation code): the filesystem broker loses a killed worker's message, Redis re-delivers it only
after its visibility timeout. A job sent twice is harmless: its claim lets one holder run it."""

import logging
import threading

from django.conf import settings
from django.db import DatabaseError, connection

from conversations.tasks import sweep_extraction_jobs

log = logging.getLogger(__name__)
_started: threading.Thread | None = None
_stop = threading.Event()
_lock = threading.Lock()


def _run(interval: float) -> None:
    while not _stop.wait(interval):
        try:
            sweep_extraction_jobs()
        except DatabaseError as exc:
            log.warning("job sweeper: database unavailable (%s); trying again in %.0fs", exc, interval)
            connection.close()
        except Exception:  # never let one bad sweep end the thread
            log.exception("job sweeper: sweep failed")
    connection.close()


def start_job_sweeper(sender=None, **kwargs) -> threading.Thread:
    """Start this process's job sweeper (once); also Celery's worker_ready receiver."""
    global _started
    with _lock:
        if _started is None or not _started.is_alive():
            _stop.clear()
            _started = threading.Thread(target=_run, args=(settings.LOCI_SWEEP_INTERVAL_SECONDS,),
                                        name="loci-job-sweeper", daemon=True)
            _started.start()
        return _started


def stop_job_sweeper(sender=None, **kwargs) -> None:
    """Celery's worker_shutdown receiver: the sweep under way ends, no other starts."""
    _stop.set()
