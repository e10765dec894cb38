"""Small idempotent tasks: each takes a document id and one stage, claims it, and queues the next."""

import logging
from dataclasses import dataclass
from typing import Callable

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import OperationalError

from ingest import pipeline
from ingest.extraction.base import ExtractionError
from ingest.parsing.base import ParseError, TransientParseError
from memory.models import Document

log = logging.getLogger(__name__)
Status = Document.Status

# Worth retrying with backoff: the next attempt may well succeed.
TRANSIENT_ERRORS = (TransientParseError, OperationalError, ConnectionError, TimeoutError)
MAX_RETRIES = 4
# Added to a lease's remaining time when waiting it out: the claim compares clocks of other machines.
LEASE_MARGIN_SECONDS = 1.0


@dataclass(frozen=True)
class Stage:
    previous: str  # the status the previous stage leaves behind
    status: str
    step: Callable
    next: str | None


STAGES = {
    "parse": Stage(Status.QUEUED, Status.PARSING, pipeline.parse_and_chunk, "extract"),
    "extract": Stage(Status.PARSING, Status.EXTRACTING, pipeline.extract_memories, "index"),
    "index": Stage(Status.EXTRACTING, Status.INDEXING, pipeline.index_document, None),
}


def run_stage(document_id: int, stage_name: str) -> bool:
    """Run one stage; True when it finished and the next stage may run. Transient errors propagate."""
    stage = STAGES[stage_name]
    document = Document.objects.select_related("kb").filter(pk=document_id).first()
    lease = settings.LOCI_STAGE_LEASE_SECONDS
    if document is None or not document.claim(stage.previous, stage.status, stage_name, lease):
        return False  # deleted, already finished, or another worker has it
    pipeline.touch_started(document)
    try:
        stage.step(document)
    except TRANSIENT_ERRORS:
        raise
    except (ParseError, ExtractionError) as exc:
        document.mark_failed(str(exc))
        return False
    except SoftTimeLimitExceeded:
        document.mark_failed(f"Processing took too long at the {stage_name} stage and was stopped.")
        return False
    except Exception as exc:  # a bug or an unreadable file: fail this document, keep the worker
        log.exception("document %s failed at %s", document_id, stage_name)
        document.mark_failed(f"Unexpected error while {stage_name} the file: {type(exc).__name__}: {exc}")
        return False
    if stage.next is None:
        document.mark_ready()
    return True


def run_inline(document_id: int) -> Document:
    """Run every stage in this process (used by `ingest --wait` when no worker picks the document up)."""
    for stage in ("parse", "extract", "index"):
        if not run_stage(document_id, stage):
            break
    return Document.objects.get(pk=document_id)


@shared_task(bind=True, max_retries=MAX_RETRIES, acks_late=True)
def process_document_stage(self, document_id: int, stage_name: str = "parse"):
    try:
        finished = run_stage(document_id, stage_name)
    except TRANSIENT_ERRORS as exc:
        if self.request.retries >= MAX_RETRIES:
            Document.objects.get(pk=document_id).mark_failed(
                f"Gave up after {MAX_RETRIES + 1} attempts at the {stage_name} stage: {exc}"
            )
            return
        raise self.retry(exc=exc, countdown=min(300, 5 * 2**self.request.retries))
    if finished and STAGES[stage_name].next:
        process_document_stage.delay(document_id, STAGES[stage_name].next)
    elif not finished and not self.request.is_eager:
        _come_back_when_lease_ends(self, document_id, stage_name)


def _come_back_when_lease_ends(task, document_id: int, stage_name: str) -> None:
    """Queue the stage again for when its lease runs out, if the document is still in it.

    A task re-delivered because its worker died arrives at once on RabbitMQ, and a retry after a
    transient error within seconds: both find the stage's lease still running. Dropping them would
    leave the document in that stage for good, since no other message for it exists. If the holder
    is alive it keeps the lease fresh and finishes, and the next attempt finds the stage done.
    """
    document = Document.objects.filter(pk=document_id).first()
    wait = document.lease_left(STAGES[stage_name].status, settings.LOCI_STAGE_LEASE_SECONDS) if document else None
    if wait is None:
        return  # deleted, failed, or past this stage
    log.info("document %s: the %s stage is leased for %.1fs more; trying again then", document_id, stage_name, wait)
    # Same retry count: waiting out a lease is not an attempt, and must not reset the transient budget.
    process_document_stage.apply_async((document_id, stage_name), countdown=wait + LEASE_MARGIN_SECONDS,
                                       retries=task.request.retries)
