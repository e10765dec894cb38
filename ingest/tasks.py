"""Small idempotent tasks: each takes a document id and one stage, claims it, and queues the next."""

import logging
import time
from dataclasses import dataclass
from typing import Callable

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from ingest import pipeline
from ingest.engine_errors import outage_of
from extraction.base import ExtractionError
from ingest.lease import Heartbeat, heartbeat_interval
from ingest.parsing.base import ParseError
from common import metrics, tracing
from memory import stage_times
from memory.models import ClaimLost, Document, DocumentGone

log = logging.getLogger(__name__)
Status = Document.Status

# Added to a lease's remaining time when waiting it out: the claim compares clocks of other machines.
LEASE_MARGIN_SECONDS = 1.0
# A task runs its document's next stage itself while it has used less than this share of its soft
# time limit (180 s of the default 1800 s); later, the next stage is queued as a task of its own.
CHAIN_SHARE = 0.1
# Backoff between attempts at a stage whose engine did not answer: 1, 2, 4 … s, at most this.
MAX_BACKOFF_SECONDS = 30.0


@dataclass(frozen=True)
class Stage:
    previous: str  # the status the previous stage leaves behind
    status: str
    step: Callable
    next: str | None
    doing: str  # for "Unexpected error while <doing> the file"


def _timed(stage_name: str, step: Callable) -> Callable:
    """The step with its duration and failures in the metrics (GET /metrics), and a span when tracing is on."""
    timed = metrics.timed_step(stage_name, step, transient=lambda exc: outage_of(exc) is not None,
                               timeout=SoftTimeLimitExceeded, lost=ClaimLost)

    def traced(document):
        with tracing.span(f"document.{stage_name}", {"loci.document.id": document.pk, "loci.kb.id": document.kb_id,
                                                     "loci.document.type": document.detected_type}):
            return timed(document)

    return traced


STAGES = {
    "parse": Stage(Status.QUEUED, Status.PARSING, _timed("parse", pipeline.parse_and_chunk), "extract", "parsing"),
    "extract": Stage(Status.PARSING, Status.EXTRACTING, _timed("extract", pipeline.extract_memories), "index",
                     "extracting memories from"),
    "index": Stage(Status.EXTRACTING, Status.INDEXING, _timed("index", pipeline.index_document), None, "indexing"),
}
STAGE_OF_STATUS = {stage.status: name for name, stage in STAGES.items()}
# Outcomes of stage_outcome.
FINISHED, NOT_CLAIMED, STOPPED = "finished", "not claimed", "stopped"


def run_stage(document_id: int, stage_name: str) -> bool:
    """Run one stage under a claim; True when it finished and the next stage may run."""
    return stage_outcome(document_id, stage_name) == FINISHED


def stage_outcome(document_id: int, stage_name: str) -> str:
    """Run one stage under a claim; FINISHED when the next stage may run.

    NOT_CLAIMED: deleted, past this stage, or another live holder has it. STOPPED: the document
    failed (with its reason), was deleted while the stage ran, or this run lost its claim and
    stopped without writing. A deleted document always ends in DocumentGone, never an error: a
    write under the claim finds no row, or (the index write's after-batch check having seen it gone
    and stopped the write) `mark_ready` finds nothing to mark.
    """
    stage = STAGES[stage_name]
    document = Document.objects.select_related("kb").filter(pk=document_id).first()
    lease = settings.LOCI_STAGE_LEASE_SECONDS
    if document is None or not document.claim(stage.previous, stage.status, stage_name, lease):
        return NOT_CLAIMED
    try:
        with Heartbeat(document, heartbeat_interval(lease)) as heartbeat:
            pipeline.touch_started(document)
            stage_times.record_stage_start(document, stage_name)
            if not _run_step(document, stage_name, stage):
                return STOPPED  # failed with its reason, or deleted
            stage_times.record_stage_end(document, stage_name)
            heartbeat.stop()  # before the claim is handed on (the lease was renewed within a beat)
            if stage.next is None:
                if not document.mark_ready():  # deleted after the index write's last check
                    raise DocumentGone(f"document {document.pk} was deleted while its {stage_name} stage ran")
            else:
                document.release_claim()
    except DocumentGone as exc:
        log.info("%s; its stage stops (the delete removed its index rows)", exc)
        return STOPPED
    except ClaimLost as exc:  # a take-over after our lease ran out: the new holder owns every write
        log.warning("%s; stopping without writing", exc)
        return STOPPED
    except Document.DoesNotExist:
        return STOPPED
    return FINISHED


def _run_step(document: Document, stage_name: str, stage: Stage) -> bool:
    """The stage's step, retried with backoff while an engine is briefly unreachable; False if it failed.

    Retried here, in the worker that holds the claim, rather than by a Celery retry: on the
    filesystem broker a message waiting for its countdown lives only in the worker's memory.
    """
    started, delay = time.monotonic(), 1.0
    give_up_after = settings.LOCI_ENGINE_RETRY_SECONDS
    while True:
        try:
            stage.step(document)
            return True
        except ClaimLost:
            raise
        except ParseError as exc:  # the file itself (encrypted, corrupt, empty): the same every time
            document.mark_failed(str(exc), retryable=False)
            return False
        except ExtractionError as exc:
            document.mark_failed(str(exc))
            return False
        except SoftTimeLimitExceeded:
            document.mark_failed(f"Processing took too long at the {stage_name} stage and was stopped.")
            return False
        except Exception as exc:
            outage = outage_of(exc)
            if outage is None:  # a bug or an unreadable file: fail this document, keep the worker
                log.exception("document %s failed at %s", document.pk, stage_name)
                document.mark_failed(f"Unexpected error while {stage.doing} the file: {type(exc).__name__}: {exc}")
                return False
            waited = time.monotonic() - started
            if waited + delay > give_up_after:
                document.mark_failed(outage.reason(waited))
                return False
            log.warning("document %s: %s did not answer at the %s stage (%s); retrying in %.0fs",
                        document.pk, outage.engine, stage_name, exc, delay)
        try:
            _wait(document, delay)
        except SoftTimeLimitExceeded:
            document.mark_failed(f"Processing took too long at the {stage_name} stage and was stopped.")
            return False
        delay = min(MAX_BACKOFF_SECONDS, delay * 2)


def _wait(document: Document, seconds: float) -> None:
    """Sleep (the heartbeat keeps the lease meanwhile), then make sure the claim is still ours."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(min(1.0, deadline - time.monotonic()))
    if not document.renew_lease():
        raise document.lost_claim()


def run_inline(document_id: int) -> Document:
    """Run every stage in this process (used by `ingest --wait` when no worker picks the document up)."""
    for stage in ("parse", "extract", "index"):
        if not run_stage(document_id, stage):
            break
    return Document.objects.get(pk=document_id)


@shared_task(bind=True, acks_late=True)
def process_document_stage(self, document_id: int, stage_name: str = "parse"):
    """Run a document's stage, then its next ones in this task while the task is young.

    Documents finish in the order they came: a document's next stage runs ahead of the next
    document's first, instead of behind every queued parse (breadth-first, the first of 22 files
    was ready after 102 s). Each stage still claims the document on its own, so a message for a
    stage that already ran finds nothing to claim. Past CHAIN_SHARE of the task's soft time limit
    the next stage is queued instead, so it gets (nearly) a whole time limit of its own.
    """
    started = time.monotonic()
    while True:
        outcome = stage_outcome(document_id, stage_name)
        following = STAGES[stage_name].next
        if outcome == FINISHED and following:
            if time.monotonic() - started < settings.CELERY_TASK_SOFT_TIME_LIMIT * CHAIN_SHARE:
                stage_name = following
                continue
            process_document_stage.delay(document_id, following)
        elif outcome == NOT_CLAIMED and not self.request.is_eager:
            _come_back_when_lease_ends(self, document_id, stage_name)
        return


def _come_back_when_lease_ends(task, document_id: int, stage_name: str) -> None:
    """Queue the stage again for when its lease runs out, if the document is still in it.

    A task re-delivered because its worker died arrives at once on RabbitMQ and finds the stage's
    lease still running. Dropping it would leave the document in that stage until the sweeper
    noticed. If the holder is alive its heartbeat keeps the lease fresh and it finishes; the next
    attempt then finds the stage done.
    """
    document = Document.objects.filter(pk=document_id).first()
    if document is not None and document.claim_token is not None:
        # A task that ran on from this stage to a later one (process_document_stage) and died there is
        # re-delivered as its first stage's message: come back for the stage it died in.
        stage_name = STAGE_OF_STATUS.get(document.status, stage_name)
    wait = document.lease_left(STAGES[stage_name].status, settings.LOCI_STAGE_LEASE_SECONDS) if document else None
    if wait is None:
        return  # deleted, failed, or past this stage
    if document.claim_token is None and STAGES[stage_name].next:
        return  # the stage finished (it let go of its claim): the next stage's message is on its way
    log.info("document %s: the %s stage is leased for %.1fs more; trying again then", document_id, stage_name, wait)
    # Same retry count: waiting out a lease is not an attempt, and must not reset the transient budget.
    process_document_stage.apply_async((document_id, stage_name), countdown=wait + LEASE_MARGIN_SECONDS,
                                       retries=task.request.retries)

