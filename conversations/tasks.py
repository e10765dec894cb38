"""Conversation memory's periodic task."""

from celery import shared_task
from django.conf import settings

from conversations.reflection import reflect


# Named as it was registered when it lived in ingest.tasks: Celery beat schedules and messages already
# queued under that name still find it.
@shared_task(name="ingest.tasks.reflect_memories", acks_late=True)
def reflect_memories(budget_seconds: float | None = None) -> dict:
    """The periodic reflection pass over every user's and agent's conversation memory (see
    conversations.reflection); schedule it with Celery beat (LOCI_REFLECT_INTERVAL_SECONDS)."""
    budget = settings.LOCI_REFLECT_BUDGET_SECONDS if budget_seconds is None else budget_seconds
    return reflect(budget_seconds=budget).as_dict()
