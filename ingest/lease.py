"""A running stage's lease: a heartbeat thread keeps it alive for as long as the stage runs.

The lease is the document's `updated_at` under the stage's claim token. Without a heartbeat a stage
that writes nothing for a while (OCR of a long scan, one slow embedding batch) looked dead, and a
re-delivered copy took the document over and ran beside it. With it, only a holder that stopped
(killed, frozen, cut off from the database) loses its lease.
"""

import logging
import threading

from django.db import DatabaseError, connection
from django.utils import timezone

from memory.models import Document

log = logging.getLogger(__name__)


def heartbeat_interval(lease_seconds: float) -> float:
    # Three beats per lease: one lost to a slow database does not let the lease run out.
    return max(0.2, lease_seconds / 3)


class Heartbeat:
    """While the `with` block runs, renew the lease of the claim `document` holds every `interval` s."""

    def __init__(self, document, interval: float):
        self.pk, self.token, self.interval = document.pk, document.claim_token, interval
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{self.pk}", daemon=True)

    def __enter__(self) -> "Heartbeat":
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
                    renewed = Document.objects.filter(pk=self.pk, claim_token=self.token).update(
                        updated_at=timezone.now())
                except DatabaseError as exc:  # keep beating: the lease outlasts a few missed beats
                    log.warning("document %s: could not renew the stage lease: %s", self.pk, exc)
                    continue
                if not renewed:
                    # Taken over (or deleted): the stage's own writes are refused from now on.
                    log.warning("document %s: the stage lost its claim; its writes will be refused", self.pk)
                    self.lost.set()
                    return
        finally:
            connection.close()  # this thread's own connection
