"""Turn what happened since an endpoint's cursors into deliveries: memory history rows and finished documents.

Runs in the worker's dispatcher (and in tests directly). Each endpoint moves its own cursors with a
conditional update in the same transaction that creates its deliveries, so two dispatchers never
deliver one event twice and a crash between the two leaves nothing half-done.
"""

from django.db import transaction
from django.utils import timezone

from memory.models import Document, Memory, MemoryHistory
from tenants.models import KnowledgeBase
from webhooks.models import WebhookDelivery, WebhookEndpoint

HISTORY_BATCH = 500
DOCUMENT_BATCH = 200
# Memories per delivery: a document's extraction adds hundreds at once, one POST each would flood a receiver.
MEMORIES_PER_DELIVERY = 100
MEMORY_EVENT = {MemoryHistory.Event.ADD: "memory.added", MemoryHistory.Event.UPDATE: "memory.updated",
                MemoryHistory.Event.DELETE: "memory.deleted"}


class _CursorMoved(Exception):
    """Another dispatcher handled these events first."""


def collect_events() -> int:
    """Create the deliveries of every active endpoint's new events; returns how many were created."""
    created = 0
    for endpoint in WebhookEndpoint.objects.filter(is_active=True).select_related("tenant", "kb"):
        try:
            created += _collect_for(endpoint)
        except _CursorMoved:
            continue
    return created


def start_cursors(endpoint: WebhookEndpoint) -> None:
    """A new endpoint hears of what happens from now on, not of the tenant's past."""
    last = MemoryHistory.objects.filter(tenant_id=endpoint.tenant_id).order_by("-id").values_list("id", flat=True)
    endpoint.history_cursor = last.first() or 0
    endpoint.documents_cursor = timezone.now()


def _collect_for(endpoint: WebhookEndpoint) -> int:
    with transaction.atomic():
        deliveries, history_cursor = _memory_deliveries(endpoint)
        more, documents_cursor = _document_deliveries(endpoint)
        deliveries += more
        moved = WebhookEndpoint.objects.filter(
            pk=endpoint.pk, history_cursor=endpoint.history_cursor, documents_cursor=endpoint.documents_cursor,
        ).update(history_cursor=history_cursor, documents_cursor=documents_cursor)
        if not moved:
            raise _CursorMoved
        WebhookDelivery.objects.bulk_create(deliveries)
    return len(deliveries)


def _memory_deliveries(endpoint) -> tuple[list[WebhookDelivery], int]:
    rows = list(MemoryHistory.objects.filter(tenant_id=endpoint.tenant_id, id__gt=endpoint.history_cursor)
                .order_by("id")[:HISTORY_BATCH])
    if not rows:
        return [], endpoint.history_cursor
    memories = {m.pk: m for m in Memory.objects.filter(pk__in={r.memory_id for r in rows})
                .only("id", "kb_id", "kind", "status", "user_id", "session_id", "document_id")}
    kb_ids = {m.kb_id for m in memories.values()} | {r.kb_id for r in rows if r.kb_id}
    slugs = dict(KnowledgeBase.objects.filter(pk__in=kb_ids).values_list("pk", "slug"))
    groups: dict[str, list[dict]] = {}
    for row in rows:
        memory = memories.get(row.memory_id)
        kb_id = memory.kb_id if memory else row.kb_id
        event = MEMORY_EVENT.get(row.event)
        if event is None or not endpoint.wants(event):
            continue
        if endpoint.kb_id is not None and kb_id != endpoint.kb_id:
            continue
        groups.setdefault(event, []).append({
            "id": str(row.memory_id),
            "kb": slugs.get(kb_id),
            "kind": memory.kind if memory else None,
            "status": row.new_status or (memory.status if memory else ""),
            "text": row.new_text or row.old_text,
            "old_text": row.old_text if row.event == MemoryHistory.Event.UPDATE else None,
            "user_id": memory.user_id if memory else None,
            "session_id": memory.session_id if memory else None,
            "document_id": memory.document_id if memory else None,
            "actor": row.actor,
            "reason": row.reason,
            "at": row.created_at.isoformat(),
        })
    deliveries = []
    for event, items in groups.items():
        for start in range(0, len(items), MEMORIES_PER_DELIVERY):
            deliveries.append(_delivery(endpoint, event, {"memories": items[start:start + MEMORIES_PER_DELIVERY]}))
    return deliveries, rows[-1].id


def _document_deliveries(endpoint) -> tuple[list[WebhookDelivery], object]:
    documents = Document.objects.filter(kb__tenant_id=endpoint.tenant_id, finished_at__gt=endpoint.documents_cursor,
                                        status__in=[Document.Status.READY, Document.Status.FAILED])
    if endpoint.kb_id is not None:
        documents = documents.filter(kb_id=endpoint.kb_id)
    documents = list(documents.select_related("kb").order_by("finished_at", "id")[:DOCUMENT_BATCH])
    deliveries = []
    for doc in documents:
        event = f"document.{doc.status}"
        if endpoint.wants(event):
            deliveries.append(_delivery(endpoint, event, {"document": {
                "id": doc.pk, "kb": doc.kb.slug, "filename": doc.filename, "status": doc.status,
                "error": doc.error, "retryable": doc.retryable, "chunk_count": doc.chunk_count,
                "episode_count": doc.episode_count, "fact_count": doc.fact_count,
                "finished_at": doc.finished_at.isoformat()}}))
    cursor = documents[-1].finished_at if documents else endpoint.documents_cursor
    return deliveries, cursor


def _delivery(endpoint, event: str, data: dict) -> WebhookDelivery:
    delivery = WebhookDelivery(endpoint=endpoint, event=event, payload={})
    delivery.payload = {"id": str(delivery.pk), "type": event, "tenant": endpoint.tenant.slug,
                        "created_at": timezone.now().isoformat(), "data": data}
    return delivery
