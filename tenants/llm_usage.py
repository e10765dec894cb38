"""The tenants' chat-model token ledger (LlmUsage rows), registered with common.llm_usage at start."""

from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.utils import timezone

from tenants.models import LlmUsage


def record(tenant_id: int, step: str, prompt_tokens: int, completion_tokens: int) -> None:
    """Add one call to today's row of (tenant, step); concurrent writers add, never overwrite."""
    day = timezone.now().date()
    added = {"calls": F("calls") + 1, "prompt_tokens": F("prompt_tokens") + prompt_tokens,
             "completion_tokens": F("completion_tokens") + completion_tokens}
    rows = LlmUsage.objects.filter(tenant_id=tenant_id, day=day, step=step)
    if rows.update(**added):
        return
    try:
        with transaction.atomic():  # a savepoint: losing the race must not break the caller's transaction
            LlmUsage.objects.create(tenant_id=tenant_id, day=day, step=step, calls=1,
                                    prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    except IntegrityError:  # another process created the row first
        rows.update(**added)


def spent_today(tenant_id: int) -> int:
    """The tenant's tokens of today (UTC), prompts and replies, every step."""
    totals = LlmUsage.objects.filter(tenant_id=tenant_id, day=timezone.now().date()).aggregate(
        prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
    return (totals["prompt"] or 0) + (totals["completion"] or 0)
