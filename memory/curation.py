"""Curation of memories: status changes (disable, supersede), edits and deletes, each with a history row.

Each action owns its transaction; the indexes follow after the commit (memory/signals.py).
"""

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memory import signals
from memory.models import CaseCluster, Memory, MemoryHistory, Message
from tenants.access import Scope


def set_memory_status(memories, status: str, *, actor: str, reason: str = "") -> int:
    """Enable, disable or supersede memories; the indexes follow (only active memories are indexed)."""
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
        signals.memories_changed.send(Memory, memories=changed)
    return len(changed)


def update_memory_text(memory: Memory, text: str, *, actor: str, reason: str = "") -> Memory:
    """Correct a memory's text; the history keeps the old text and the indexes get the new one."""
    with transaction.atomic():
        MemoryHistory.objects.create(memory_id=memory.id, tenant_id=memory.tenant_id,
                                     event=MemoryHistory.Event.UPDATE, old_text=memory.text, new_text=text,
                                     old_status=memory.status, new_status=memory.status, actor=actor,
                                     reason=reason[:300])
        memory.text = text
        memory.save(update_fields=["text", "updated_at"])
        signals.memories_changed.send(Memory, memories=[memory])
    return memory


def delete_memories(memories, *, actor: str, reason: str = "deleted") -> int:
    """Delete memories (an episode takes its facts along) from the database, then from both indexes.

    The one memory delete behind the API, the Django admin (one or "delete selected") and
    `manage.py delete`; `memories` is a queryset or a list, already limited to what the caller may
    touch. Ids are read up front and the index rows removed after the commit, whether or not the
    database still held the memories, so a second run finishes what a failed removal left.
    """
    memories = list(memories)
    pks = {m.pk for m in memories}
    with transaction.atomic():
        doomed = list(Memory.objects.filter(Q(pk__in=pks) | Q(parent_id__in=pks))
                      .only("id", "tenant_id", "kb_id", "text", "status"))
        MemoryHistory.objects.bulk_create(
            [MemoryHistory(memory_id=m.pk, tenant_id=m.tenant_id, kb_id=m.kb_id, event=MemoryHistory.Event.DELETE,
                           old_text=m.text, old_status=m.status, actor=actor, reason=reason[:300]) for m in doomed], batch_size=500)
        Memory.objects.filter(pk__in=[m.pk for m in doomed]).delete()
        scopes: dict[int, tuple[set, set]] = {}
        for m in [*doomed, *memories]:
            kb_ids, ids = scopes.setdefault(m.tenant_id, (set(), set()))
            kb_ids.add(m.kb_id)
            ids.add(m.pk)
        for tenant_id, (kb_ids, ids) in scopes.items():
            signals.memories_deleted.send(Memory, tenant_id=tenant_id, kb_ids=kb_ids, memory_ids=sorted(ids, key=str))
    return len(doomed)


def delete_messages(messages, *, actor: str, reason: str = "deleted") -> int:
    """Delete chat messages and every memory that cites one of them, from the database and both indexes.

    The Django admin's delete of messages (one or "delete selected"): deleting a message used to
    leave the facts extracted from it searchable. A memory citing a deleted message goes whole (with
    an episode, its facts), through `delete_memories`, so history rows and index removals follow.
    Returns the number of memories deleted.
    """
    messages = list(messages)
    cited: dict[tuple, set[str]] = {}
    for message in messages:
        cited.setdefault((message.tenant_id, message.kb_id, message.user_id, message.session_id), set()).add(
            message.message_id)
    with transaction.atomic():
        doomed = []
        for (tenant_id, kb_id, user_id, session_id), ids in cited.items():
            # source_message_ids is a JSON list: compared here, over one session's memories.
            for memory in Memory.objects.filter(tenant_id=tenant_id, kb_id=kb_id, user_id=user_id,
                                                session_id=session_id).only("id", "tenant_id", "kb_id",
                                                                            "source_message_ids"):
                if ids.intersection(memory.source_message_ids or ()):
                    doomed.append(memory)
        deleted = delete_memories(doomed, actor=actor, reason=reason) if doomed else 0
        Message.objects.filter(pk__in=[m.pk for m in messages]).delete()
    return deleted


def delete_memory(scope: Scope, memory: Memory) -> int:
    """Delete one memory (an episode takes its facts along) from the database and both indexes."""
    scope.require_kb(memory.kb_id)
    return delete_memories([memory], actor=scope.actor, reason="deleted through the API")


def delete_memories_in_scope(scope: Scope, kb_ids, *, user_id: str, session_id: str | None = None) -> int:
    """Delete a user's (or one session's) memories and raw messages from the database, then from both indexes.

    The index rows are removed by user (and session) after the commit, even when the database held
    nothing any more, so running it again finishes a delete whose removal failed.
    """
    kb_ids = tuple(sorted(set(kb_ids) & scope.kb_ids))
    memories = Memory.objects.filter(tenant=scope.tenant, kb_id__in=kb_ids, user_id=user_id)
    messages = Message.objects.filter(tenant=scope.tenant, kb_id__in=kb_ids, user_id=user_id)
    if session_id is not None:
        memories, messages = memories.filter(session_id=session_id), messages.filter(session_id=session_id)
    tenant_id = scope.tenant.pk
    with transaction.atomic():
        doomed = list(memories.only("id", "tenant_id", "kb_id", "text", "status"))
        _record_deletes(scope, doomed)
        memories.delete()
        messages.delete()
        if session_id is None:  # the user's case clusters (centroids of their tasks) go with their cases
            CaseCluster.objects.filter(tenant=scope.tenant, kb_id__in=kb_ids, user_id=user_id).delete()
        signals.user_memories_deleted.send(Memory, tenant_id=tenant_id, kb_ids=kb_ids, user_id=user_id,
                                           session_id=session_id)
    return len(doomed)


def _record_deletes(scope: Scope, memories: list[Memory]) -> None:
    now = timezone.now()
    MemoryHistory.objects.bulk_create(
        [MemoryHistory(memory_id=m.pk, tenant_id=m.tenant_id, kb_id=m.kb_id, event=MemoryHistory.Event.DELETE,
                       old_text=m.text, old_status=m.status, actor=scope.actor, reason="deleted through the API",
                       created_at=now)
         for m in memories], batch_size=500)
