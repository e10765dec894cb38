"""An extraction job: one POST /memories or /memories/flush whose extraction runs off the request path.

Its own module because memory/models.py is at its size limit; memory.models imports it, so Django
registers it with the core's other rows. The claim works as a document stage's does: a conditional
update moves the job to RUNNING under a fresh token, a heartbeat keeps `updated_at` fresh while it
runs, and a holder that stopped renewing it (a killed worker) is taken over after the lease.
"""

import uuid

from django.db import models
from django.utils import timezone

from tenants.models import KnowledgeBase, Tenant


class ExtractionJob(models.Model):
    """Extract a session's pending turns: the MemCells they complete (accumulate) or all of them (flush)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    class Kind(models.TextChoices):
        ACCUMULATE = "accumulate"  # POST /memories: the MemCells the turns complete
        FLUSH = "flush"  # POST /memories/flush: every pending turn, the tail included

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="extraction_jobs")
    kb = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="extraction_jobs")
    user_id = models.CharField(max_length=200)
    session_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    actor = models.CharField(max_length=200, blank=True, help_text="who asked: the history's actor")
    result = models.JSONField(null=True, blank=True, help_text="the answer a synchronous request gives")
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text="claims taken: above 1 after a take-over")
    claim_token = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(default=timezone.now, help_text="the lease: renewed while it runs")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["kb", "user_id", "session_id", "status"])]

    def __str__(self):
        return f"{self.kind} {self.session_id} ({self.status})"

    @property
    def final(self) -> bool:
        return self.kind == self.Kind.FLUSH

    def claim(self, lease_seconds: float) -> bool:
        """Move to RUNNING under a new token: from PENDING, or from a RUNNING whose holder stopped
        renewing its lease for `lease_seconds`. False if it is finished or a live holder has it."""
        now = timezone.now()
        stale = now - timezone.timedelta(seconds=lease_seconds)
        token = uuid.uuid4()
        updated = ExtractionJob.objects.filter(
            models.Q(status=self.Status.PENDING) | models.Q(status=self.Status.RUNNING, updated_at__lt=stale),
            pk=self.pk,
        ).update(status=self.Status.RUNNING, claim_token=token, updated_at=now, attempts=models.F("attempts") + 1)
        if updated:
            self.status, self.claim_token, self.updated_at = self.Status.RUNNING, token, now
        return bool(updated)

    def _held(self):
        return ExtractionJob.objects.filter(pk=self.pk, status=self.Status.RUNNING, claim_token=self.claim_token)

    def renew_lease(self) -> bool:
        """False once another claim took the job over (or it is gone)."""
        return bool(self._held().update(updated_at=timezone.now()))

    def finish(self, result: dict) -> bool:
        """DONE with the synchronous answer; False when another holder took the job over meanwhile."""
        now = timezone.now()
        done = self._held().update(status=self.Status.DONE, result=result, claim_token=None, updated_at=now,
                                   finished_at=now)
        if done:
            self.status, self.result, self.finished_at = self.Status.DONE, result, now
        return bool(done)

    def fail(self, reason: str) -> bool:
        now = timezone.now()
        failed = self._held().update(status=self.Status.FAILED, error=reason[:2000], claim_token=None,
                                     updated_at=now, finished_at=now)
        if failed:
            self.status, self.error, self.finished_at = self.Status.FAILED, reason[:2000], now
        return bool(failed)
