"""Extraction off the request path: a POST records a job, a worker runs it, the caller polls or waits.

With an LLM a MemCell makes several serial model calls, and a flush holds them all; a request that
runs them holds its connection (and a web worker) for up to LLM_FLUSH_DEADLINE_SECONDS. So the
requests that may extract (`POST /memories` once two turns wait, `POST /memories/flush`) store the
turns, record an ExtractionJob and queue it on commit; the worker's task claims the job, extracts,
and stores the answer the synchronous request gives. LOCI_ASYNC_EXTRACTION says when: "llm" (the
default: only where a model is configured; the rules alone answer in well under a second, measured
in bench/RESULTS.md), "always" or "never".

Nothing is written twice: a job is claimed with a conditional update (a redelivered message finds it
done or held), and the extraction under it claims each MemCell's turns as the synchronous path does
(conversations.actions.extract_segment), so two jobs of one session never extract the same turns. A
job whose worker died stops renewing its lease; the next message or the sweeper takes it over, and it
extracts the turns still pending (the MemCells written before the death stay written).
"""

import logging
import time

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from common.heartbeat import LeaseHeartbeat, heartbeat_interval
from conversations import actions
from memory.models import ExtractionJob, Message
from tenants.access import Scope
from tenants.models import KnowledgeBase

log = logging.getLogger(__name__)
Status = ExtractionJob.Status
# A finished job is kept this long for its caller to read, then the sweeper deletes it: with an LLM,
# every POST of two or more turns makes one, and a client reads its answer within minutes.
FINISHED_JOB_DAYS = 7


def queued_extraction() -> bool:
    """Whether extraction goes through the queue (LOCI_ASYNC_EXTRACTION), for this configuration."""
    mode = settings.LOCI_ASYNC_EXTRACTION
    return mode == "always" or (mode == "llm" and settings.LLM_ENABLED)


def record_job(scope: Scope, kb: KnowledgeBase, *, user_id: str, session_id: str, kind: str,
               reuse: bool = True) -> tuple[ExtractionJob, bool]:
    """A PENDING job for the session and whether it is new (the caller queues a new one).

    With `reuse`, a job of the same kind still pending for the session answers instead of a second
    one: it has not started, so it will see the turns stored before it.
    """
    if reuse:
        waiting = ExtractionJob.objects.filter(kb=kb, user_id=user_id, session_id=session_id, kind=kind,
                                               status=Status.PENDING).order_by("created_at").first()
        if waiting is not None:
            return waiting, False
    job = ExtractionJob.objects.create(tenant=scope.tenant, kb=kb, user_id=user_id, session_id=session_id, kind=kind,
                                       actor=scope.actor[:200])
    return job, True


def run_job(job_id, *, deadline_seconds: float | None = None) -> ExtractionJob | None:
    """Claim the job and extract under it; None when it is gone, finished, or a live holder has it."""
    job = ExtractionJob.objects.select_related("kb", "tenant").filter(pk=job_id).first()
    if job is None or not job.claim(settings.LOCI_EXTRACTION_LEASE_SECONDS):
        return None
    scope = Scope(job.tenant, frozenset([job.kb_id]), True, True, job.actor)
    with _Heartbeat(job):
        try:
            result = extract(scope, job.kb, job, deadline_seconds=deadline_seconds)
        except Exception as exc:  # a bug or an engine down: the job says so; its turns stay pending
            log.exception("extraction job %s failed", job.pk)
            job.fail(f"{type(exc).__name__}: {exc}")
            return job
    if not job.finish(result):
        log.warning("extraction job %s was taken over while it ran; the other holder answers", job.pk)
    return job


def extract(scope: Scope, kb: KnowledgeBase, job: ExtractionJob, *, deadline_seconds: float | None) -> dict:
    """What the synchronous request answers, for the job's session (its turns are stored already)."""
    counts = actions.extract_session(scope, kb, user_id=job.user_id, session_id=job.session_id, final=job.final,
                                     deadline_seconds=deadline_seconds)
    if job.final:
        return actions.flush_answer(counts)
    waiting = actions.pending_messages(kb, job.user_id, job.session_id).count()
    return actions.accumulate_answer(counts, waiting)


def may_extract(kb: KnowledgeBase, user_id: str, session_id: str) -> bool:
    """Whether the pending turns could complete a MemCell: a single turn never does (segmentation)."""
    return Message.objects.filter(kb=kb, user_id=user_id, session_id=session_id,
                                  segment_id__isnull=True)[:2].count() > 1


def describe(job: ExtractionJob) -> dict:
    """The job as GET /api/v1/memories/jobs/{id} answers it."""
    return {"job_id": str(job.pk), "kind": job.kind, "status": job.status, "kb": job.kb.slug, "user_id": job.user_id,
            "session_id": job.session_id, "result": job.result if job.status == Status.DONE else None,
            "error": job.error or None, "attempts": job.attempts, "created_at": job.created_at,
            "finished_at": job.finished_at, "status_url": status_url(job)}


def status_url(job: ExtractionJob) -> str:
    return f"/api/v1/memories/jobs/{job.pk}"


def wait_for(job: ExtractionJob, seconds: float, *, poll: float = 0.05) -> ExtractionJob:
    """The job once finished, or as it stands after `seconds` (re-read from the database)."""
    deadline = time.monotonic() + seconds
    while True:
        job.refresh_from_db()
        if job.status in (Status.DONE, Status.FAILED) or time.monotonic() >= deadline:
            return job
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        poll = min(poll * 2, 1.0)


def stalled_jobs() -> list[str]:
    """The jobs a dead worker or a lost message left behind, made PENDING again for the caller to send:
    RUNNING past its lease, PENDING for LOCI_STALLED_QUEUE_SECONDS. Finished jobs past FINISHED_JOB_DAYS go."""
    now = timezone.now()
    lapsed = now - timezone.timedelta(seconds=settings.LOCI_EXTRACTION_LEASE_SECONDS)
    waiting = now - timezone.timedelta(seconds=settings.LOCI_STALLED_QUEUE_SECONDS)
    found = []
    for status, before in ((Status.RUNNING, lapsed), (Status.PENDING, waiting)):
        for pk, moved in (ExtractionJob.objects.filter(status=status, updated_at__lt=before)
                          .values_list("pk", "updated_at")[:500]):
            # Conditional on the row as read: of several sweepers, one sends it, for this period. The old
            # holder's token is replaced at the next claim, so its late answer is refused.
            if ExtractionJob.objects.filter(pk=pk, status=status, updated_at=moved).update(
                    status=Status.PENDING, updated_at=now):
                found.append(str(pk))
    ExtractionJob.objects.filter(status__in=[Status.DONE, Status.FAILED],
                                 finished_at__lt=now - timezone.timedelta(days=FINISHED_JOB_DAYS)).delete()
    return found


class _Heartbeat(LeaseHeartbeat):
    """Renew the job's lease every third of it while the extraction runs (in a thread of its own)."""

    def __init__(self, job: ExtractionJob):
        self.job = job
        self.name = f"job-lease-{job.pk}"
        super().__init__(heartbeat_interval(settings.LOCI_EXTRACTION_LEASE_SECONDS))

    def renew(self) -> bool:
        return self.job.renew_lease()

    def on_unreachable(self, exc: DatabaseError) -> None:
        log.warning("extraction job %s: could not renew its lease: %s", self.job.pk, exc)

    def on_lost(self) -> None:
        log.warning("extraction job %s: taken over; this holder's answer will be dropped", self.job.pk)
