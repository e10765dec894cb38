"""`up`'s clock for the reflection pass: every LOCI_REFLECT_INTERVAL_SECONDS it queues the worker task
ingest.tasks.reflect_memories, so a `make run` installation reflects without a Celery beat process.

A deployment that runs beat (CELERY_BEAT_SCHEDULE names the same task and interval) gets the same
pass from there; two clocks queueing it is harmless, since a pass run twice changes nothing. The
first pass is queued one interval after the start, not at it: a restart loop must not reflect in a loop.
"""

import logging
import threading
from collections.abc import Callable

from django.conf import settings

from conversations.tasks import reflect_memories

log = logging.getLogger(__name__)


def start(interval: float | None = None, queue: Callable[[], object] | None = None,
          stop: threading.Event | None = None) -> threading.Thread | None:
    """Start the clock thread (a daemon: it dies with `up`); None when the interval is 0 (off)."""
    every = settings.LOCI_REFLECT_INTERVAL_SECONDS if interval is None else interval
    if every <= 0:
        return None
    queue = queue or reflect_memories.delay
    stop = stop or threading.Event()

    def run() -> None:
        while not stop.wait(every):
            try:
                queue()
            except Exception:  # a broker that is down now may be up at the next tick
                log.exception("reflection: could not queue the pass")

    thread = threading.Thread(target=run, name="loci-reflection-timer", daemon=True)
    thread.start()
    log.info("reflection: a pass is queued every %ss", every)
    return thread
