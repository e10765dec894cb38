"""Curation of memories: status changes and edits, each with a history row and an index update."""

from django.db import transaction

from ingest.models import Memory, MemoryHistory


def set_memory_status(memories, status: str, *, actor: str, reason: str = "") -> int:
    """Enable, disable or supersede memories; the indexes follow (only active memories are indexed)."""
    from retrieval.projection import index_memories

    changed = []
    with transaction.atomic():
        for memory in memories.select_for_update():
            if memory.status == status:
                continue
            MemoryHistory.objects.create(memory_id=memory.id, tenant_id=memory.tenant_id,
                                         event=MemoryHistory.Event.UPDATE, old_text=memory.text,
                                         new_text=memory.text, old_status=memory.status, new_status=status,
                                         actor=actor, reason=reason[:300])
            memory.status = status
            memory.save(update_fields=["status", "updated_at"])
            changed.append(memory)
        transaction.on_commit(lambda: index_memories(changed))
    return len(changed)


def update_memory_text(memory: Memory, text: str, *, actor: str, reason: str = "") -> Memory:
    """Correct a memory's text; the history keeps the old text and the indexes get the new one."""
    from retrieval.projection import index_memories

    with transaction.atomic():
        MemoryHistory.objects.create(memory_id=memory.id, tenant_id=memory.tenant_id,
                                     event=MemoryHistory.Event.UPDATE, old_text=memory.text, new_text=text,
                                     old_status=memory.status, new_status=memory.status, actor=actor,
                                     reason=reason[:300])
        memory.text = text
        memory.save(update_fields=["text", "updated_at"])
        transaction.on_commit(lambda: index_memories([memory]))
    return memory
