"""History rows for a document's extraction: ADD for new memories, UPDATE for changed ones, DELETE for
those a re-run no longer produces. One bulk insert per extraction, so a long document stays cheap."""

from django.utils import timezone

from memory.models import Document, Memory, MemoryHistory

ACTOR = "extraction"


def previous_memories(document: Document) -> dict:
    """What the document's memories were before a (re-)extraction replaces them: id → (text, status)."""
    return {pk: (text, status) for pk, text, status in document.memories.values_list("id", "text", "status")}


def record_extraction(document: Document, before: dict, after: list[Memory]) -> int:
    """Write the changes from `before` to `after` (unchanged memories write nothing); returns the row count."""
    now, tenant_id = timezone.now(), document.kb.tenant_id
    reason = f"extracted from document {document.pk} ({document.filename})"[:300]
    rows, seen = [], set()
    for m in after:
        seen.add(m.pk)
        old = before.get(m.pk)
        if old is None:
            rows.append(MemoryHistory(memory_id=m.pk, tenant_id=tenant_id, event=MemoryHistory.Event.ADD,
                                      new_text=m.text, new_status=m.status, actor=ACTOR, reason=reason, created_at=now))
        elif old != (m.text, m.status):
            rows.append(MemoryHistory(memory_id=m.pk, tenant_id=tenant_id, event=MemoryHistory.Event.UPDATE,
                                      old_text=old[0], old_status=old[1], new_text=m.text, new_status=m.status,
                                      actor=ACTOR, reason=f"re-{reason}"[:300], created_at=now))
    for pk, (text, status) in before.items():
        if pk not in seen:
            rows.append(MemoryHistory(memory_id=pk, tenant_id=tenant_id, event=MemoryHistory.Event.DELETE,
                                      old_text=text, old_status=status, actor=ACTOR,
                                      reason=f"no longer extracted from document {document.pk}", created_at=now))
    MemoryHistory.objects.bulk_create(rows, batch_size=1000)
    return len(rows)
