"""Curation of memories: status changes, edits and deletes, each with a history row and an index update."""

from django.db import transaction
from django.db.models import Q

from memory.models import Memory, MemoryHistory


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


def delete_memories(memories, *, actor: str, reason: str = "deleted") -> int:
    """Delete memories (an episode takes its facts along) from the database, then from both indexes.

    The one memory delete behind the API, the Django admin (one or "delete selected") and
    `manage.py delete`; `memories` is a queryset or a list, already limited to what the caller may
    touch. Ids are read up front and the index rows removed after the commit, whether or not the
    database still held the memories, so a second run finishes what a failed removal left.
    """
    from retrieval.projection import remove_memory_rows

    memories = list(memories)
    pks = {m.pk for m in memories}
    with transaction.atomic():
        doomed = list(Memory.objects.filter(Q(pk__in=pks) | Q(parent_id__in=pks))
                      .only("id", "tenant_id", "kb_id", "text", "status"))
        MemoryHistory.objects.bulk_create(
            [MemoryHistory(memory_id=m.pk, tenant_id=m.tenant_id, event=MemoryHistory.Event.DELETE, old_text=m.text,
                           old_status=m.status, actor=actor, reason=reason[:300]) for m in doomed], batch_size=500)
        Memory.objects.filter(pk__in=[m.pk for m in doomed]).delete()
        scopes: dict[int, tuple[set, set]] = {}
        for m in [*doomed, *memories]:
            kb_ids, ids = scopes.setdefault(m.tenant_id, (set(), set()))
            kb_ids.add(m.kb_id)
            ids.add(m.pk)

        def unindex():
            for tenant_id, (kb_ids, ids) in scopes.items():
                remove_memory_rows(tenant_id, kb_ids, sorted(ids, key=str))

        transaction.on_commit(unindex)
    return len(doomed)
