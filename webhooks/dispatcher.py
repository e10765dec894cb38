"""The worker's webhook loop: every few seconds, collect new events and attempt the deliveries that are due.

One daemon thread per worker process, started when the worker is ready (like the ingest sweeper).
Several workers may run it at once: events are collected under a cursor that only one can move, and
each attempt is claimed with a conditional update, so a delivery is made once per attempt.
"""

import logging
import threading

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from webhooks.delivery import attempt
from webhooks.events import collect_events
from webhooks.models import WebhookDelivery

log = logging.getLogger(__name__)
DUE_BATCH = 50
_stop = threading.Event()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def dispatch_once() -> dict[str, int]:
    """Collect events and attempt every due delivery (up to a batch); returns the counts."""
    created = collect_events()
    due = list(WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=timezone.now())
               .order_by("next_attempt_at").values_list("pk", flat=True)[:DUE_BATCH])
    outcomes = [attempt(pk) for pk in due]
    return {"created": created, "delivered": outcomes.count(WebhookDelivery.Status.DELIVERED),
            "attempted": sum(1 for o in outcomes if o)}


def _loop():
    while not _stop.wait(settings.LOCI_WEBHOOK_POLL_SECONDS):
        try:
            dispatch_once()
        except DatabaseError:
            log.exception("webhook dispatch failed; trying again in %ss", settings.LOCI_WEBHOOK_POLL_SECONDS)
        finally:
            connection.close()


def start_dispatcher_in_worker(sender=None, **kwargs):
    global _thread
    with _lock:
        if _thread is not None and _thread.is_alive():
            return
        _stop.clear()
        _thread = threading.Thread(target=_loop, name="loci-webhooks", daemon=True)
        _thread.start()


def stop_dispatcher(timeout: float = 5.0) -> None:
    """Stop the loop (tests, a worker shutting down) and wait for it."""
    global _thread
    with _lock:
        _stop.set()
        if _thread is not None:
            _thread.join(timeout)
        _thread = None
