"""A lease kept alive by a thread: while a `with` block runs, `renew()` is called every `interval`
seconds. Documents' stages (ingest/lease.py) and extraction jobs (conversations/extraction_jobs.py)
each hold a claim this way; they may not import each other, so the thread lives here.

A beat that cannot reach the database is logged and the next one tries again (the lease outlasts a
few missed beats). A `renew()` that returns False means the claim was taken over (or its row
deleted): `lost` is set and the beating ends.
"""

import logging
import threading

from django.db import DatabaseError, connection

log = logging.getLogger(__name__)


def heartbeat_interval(lease_seconds: float) -> float:
    # Three beats per lease: one lost to a slow database does not let the lease run out.
    return max(0.2, lease_seconds / 3)


class LeaseHeartbeat:
    """Subclasses say what one beat does (`renew`), what the thread is called and what a lost claim means."""

    name = "lease"

    def __init__(self, interval: float):
        self.interval = interval
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def renew(self) -> bool:
        raise NotImplementedError

    def on_lost(self) -> None:
        """Log what a lost claim means for the work under way."""

    def on_unreachable(self, exc: DatabaseError) -> None:
        log.warning("%s: could not renew its lease: %s", self.name, exc)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop renewing, and wait for a beat in flight. Called before the claim changes hands: a
        beat after the release would find the claim gone and report it lost."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval + 5)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    renewed = self.renew()
                except DatabaseError as exc:  # keep beating: the lease outlasts a few missed beats
                    self.on_unreachable(exc)
                    continue
                if not renewed:
                    self.on_lost()
                    self.lost.set()
                    return
        finally:
            connection.close()  # this thread's own connection
