"""Conversation memory's tasks: extraction jobs (conversations/extraction_jobs.py) and the periodic reflection."""

import logging

from celery import shared_task
from django.conf import settings
from django.db import transaction

from conversations import extraction_jobs
from conversations.reflection import reflect
from memory.models import ExtractionJob

log = logging.getLogger(__name__)


@shared_task(acks_late=True)
def run_extraction_job(job_id: str) -> str | None:
    """Claim the extraction job and run it; a job already finished or held by a live worker is left alone
    (a redelivered message), one whose worker died is taken over once its lease has run out."""
    job = extraction_jobs.run_job(job_id)
    return job.status if job else None


def queue_on_commit(job: ExtractionJob) -> None:
    """Send the job to a worker once the request's transaction commits (a worker never sees it missing)."""
    transaction.on_commit(lambda: send(job.pk))


def send(job_id) -> bool:
    try:
        run_extraction_job.delay(str(job_id))
        return True
    except Exception:  # broker down: the job stays pending; the sweeper sends it again
        log.exception("could not queue extraction job %s", job_id)
        return False


def sweep_extraction_jobs() -> list[str]:
    """Send again the jobs a dead worker or a lost message left behind (see extraction_jobs.stalled_jobs)."""
    sent = [job_id for job_id in extraction_jobs.stalled_jobs() if send(job_id)]
    if sent:
        log.warning("sweeper: queued %d extraction job(s) again: %s", len(sent), sent[:20])
    return sent


# Named as it was registered when it lived in ingest.tasks: Celery beat schedules and messages already
# queued under that name still find it.
@shared_task(name="ingest.tasks.reflect_memories", acks_late=True)
def reflect_memories(budget_seconds: float | None = None) -> dict:
    """The periodic reflection pass over every user's and agent's conversation memory (see
    conversations.reflection); schedule it with Celery beat (LOCI_REFLECT_INTERVAL_SECONDS)."""
    budget = settings.LOCI_REFLECT_BUDGET_SECONDS if budget_seconds is None else budget_seconds
    return reflect(budget_seconds=budget).as_dict()
