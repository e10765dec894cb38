"""A running stage's lease: a heartbeat thread keeps it alive for as long as the stage runs.

The lease is the document's `updated_at` under the stage's claim token. Without a heartbeat a stage
that writes nothing for a while (OCR of a long scan, one slow embedding batch) looked dead, and a
re-delivered copy took the document over and ran beside it. With it, only a holder that stopped
(killed, frozen, cut off from the database) loses its lease.
"""

import logging

from django.db import DatabaseError
from django.utils import timezone

from common.heartbeat import LeaseHeartbeat, heartbeat_interval
from memory.models import Document

__all__ = ["Heartbeat", "heartbeat_interval"]

log = logging.getLogger(__name__)


class Heartbeat(LeaseHeartbeat):
    """While the `with` block runs, renew the lease of the claim `document` holds every `interval` s."""

    def __init__(self, document, interval: float):
        self.pk, self.token = document.pk, document.claim_token
        self.name = f"lease-{self.pk}"
        super().__init__(interval)

    def renew(self) -> bool:
        return bool(Document.objects.filter(pk=self.pk, claim_token=self.token).update(updated_at=timezone.now()))

    def on_unreachable(self, exc: DatabaseError) -> None:
        log.warning("document %s: could not renew the stage lease: %s", self.pk, exc)

    def on_lost(self) -> None:
        # Taken over (or deleted): the stage's own writes are refused from now on.
        log.warning("document %s: the stage lost its claim; its writes will be refused", self.pk)
