"""Editing one memory through the API (PATCH): its text, its status, or both, in one transaction.

The writes themselves are the curation actions (memory.curation): each writes its history row
and re-embeds / re-indexes the memory on commit; this module validates what a caller may ask for.
"""

from django.db import transaction

from conversations.actions import ConversationError
from memory.curation import set_memory_status, update_memory_text
from memory.models import Memory, MemoryHistory
from tenants.access import Scope
from tenants.models import KnowledgeBase

# A caller may enable or disable a memory; "superseded" is set only by extraction (it names a successor).
EDITABLE_STATUSES = (Memory.Status.ACTIVE, Memory.Status.DISABLED)


def patch_memory(scope: Scope, memory: Memory, *, text: str | None = None, status: str | None = None,
                 via: str = "the API") -> Memory:
    """Apply a text and/or status change; both land or neither does. A no-op change writes nothing.

    `via` names the entry point (the API, the console) in the history row's reason.
    """
    scope.require_kb(memory.kb_id)
    if text is None and status is None:
        raise ConversationError("Send 'text', 'status' or both.")
    if text is not None:
        text = text.strip()
        if not text:
            raise ConversationError("A memory's text cannot be empty; delete the memory instead.")
        if len(text) > Memory.MAX_TEXT_CHARS:
            raise ConversationError(f"A memory's text is at most {Memory.MAX_TEXT_CHARS} characters.")
    if status is not None and status not in EDITABLE_STATUSES:
        raise ConversationError(f"'status' must be one of: {', '.join(EDITABLE_STATUSES)}.")
    with transaction.atomic():
        memory = Memory.objects.select_for_update().get(pk=memory.pk)
        if text is not None and text != memory.text:
            update_memory_text(memory, text, actor=scope.actor, reason=f"edited through {via}")
        if status is not None and status != memory.status:
            set_memory_status(Memory.objects.filter(pk=memory.pk), status, actor=scope.actor,
                              reason=f"status set through {via}")
            memory.refresh_from_db()
    return memory


def memory_history(scope: Scope, memory_id) -> list[MemoryHistory]:
    """Every history row of a memory, oldest first; [] when the caller may not see it.

    A deleted memory has no KB left to check the caller's grant against, so its history is shown
    only to callers who may read every KB of the tenant (a KB-limited key sees none of it).
    """
    memory = Memory.objects.filter(pk=memory_id, tenant=scope.tenant).only("kb_id").first()
    if memory is not None:
        if memory.kb_id not in scope.kb_ids:
            return []
    elif set(KnowledgeBase.objects.filter(tenant=scope.tenant).values_list("id", flat=True)) - scope.kb_ids:
        return []
    return list(MemoryHistory.objects.filter(memory_id=memory_id, tenant=scope.tenant).order_by("created_at", "id"))


def history_entry(row: MemoryHistory) -> dict:
    """One history row as the API and the console show it: ADD has no before, DELETE no after."""
    add, delete = row.event == MemoryHistory.Event.ADD, row.event == MemoryHistory.Event.DELETE
    return {
        "id": row.pk, "memory_id": str(row.memory_id), "event": row.event, "actor": row.actor, "reason": row.reason,
        "created_at": row.created_at,
        "before": None if add else {"text": row.old_text, "status": row.old_status},
        "after": None if delete else {"text": row.new_text, "status": row.new_status},
    }
