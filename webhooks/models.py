"""Webhook endpoints a tenant or one of its knowledge bases registers, and each delivery made to them.

The events themselves are not stored twice: memory events are read from the memory history (every
add, update and delete writes a row there, in the transaction that made the change) and document
events from the documents' finish times, each endpoint keeping a cursor into both. So an event is
never lost to a crash between a change and its notification, and no write path had to learn about
webhooks.
"""

import secrets
import uuid

from django.db import models
from django.utils import timezone

from tenants.models import KnowledgeBase, Tenant

EVENTS = ("document.ready", "document.failed", "memory.added", "memory.updated", "memory.deleted")


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


class WebhookEndpoint(models.Model):
    """A URL that receives signed events of a tenant, or of one knowledge base when `kb` is set."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="webhooks")
    kb = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, null=True, blank=True, related_name="webhooks",
                           help_text="empty: every knowledge base of the tenant")
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    events = models.JSONField(default=list, help_text="event types delivered; empty: all of them")
    # Kept in clear: the receiver checks an HMAC made with it, so it cannot be stored as a hash.
    secret = models.CharField(max_length=100, default=new_secret, editable=False)
    is_active = models.BooleanField(default=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Cursors: the last memory history row and the last document finish already turned into deliveries.
    history_cursor = models.BigIntegerField(default=0, editable=False)
    documents_cursor = models.DateTimeField(default=timezone.now, editable=False)
    last_status = models.CharField(max_length=200, blank=True, help_text="outcome of the last delivery attempt")
    last_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self):
        return self.url

    def wants(self, event: str) -> bool:
        return not self.events or event in self.events


class WebhookDelivery(models.Model):
    """One signed POST of one event to one endpoint, retried with back-off until it succeeds or gives up."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=32)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now, db_index=True)
    response_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self):
        return f"{self.event} → {self.endpoint.url} ({self.status})"
