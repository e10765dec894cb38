"""The indexes follow the core: receivers of memory/signals.py and tenants/signals.py (connected in apps.py).

Each signal arrives inside the transaction of the action that sent it; the index work is scheduled
for after its commit, so a rolled-back action leaves the indexes as they were.
"""

from django.db import transaction

from retrieval import projection, summary_tree
from retrieval.models import RemovedKnowledgeBase


def index_memories(sender, *, memories, **kwargs):
    def after():
        projection.index_memories(memories)
        summary_tree.follow_changes(memories)  # the trees over a changed episode, rebuilt

    transaction.on_commit(after)


def remove_memories(sender, *, tenant_id, kb_ids, memory_ids, **kwargs):
    def after():
        projection.remove_memory_rows(tenant_id, kb_ids, memory_ids)
        summary_tree.follow_deletes(tenant_id, kb_ids, memory_ids)  # no summary keeps a deleted episode's words

    transaction.on_commit(after)


def remove_user_memories(sender, *, tenant_id, kb_ids, user_id, session_id, **kwargs):
    def after():
        projection.remove_scope_rows(tenant_id, kb_ids, user_id=user_id, session_id=session_id)
        summary_tree.follow_deletes(tenant_id, kb_ids, user_id=user_id, session_id=session_id)

    transaction.on_commit(after)


def remove_chunks(sender, *, tenant_id, kb_id, chunk_ids, **kwargs):
    transaction.on_commit(lambda: projection.remove_chunk_rows(tenant_id, kb_id, chunk_ids))


def remove_document(sender, *, tenant_id, kb_id, document_id, **kwargs):
    transaction.on_commit(lambda: projection.remove_document_rows(tenant_id, kb_id, document_id))


def remove_knowledge_bases(sender, *, tenant_id, knowledge_bases, again, **kwargs):
    """Tombstone the KBs in the deleting transaction, then remove their rows (and those of `again`) on commit."""
    # The tombstone outlives the KB so `reconcile` can still find rows a failed removal left behind.
    RemovedKnowledgeBase.objects.bulk_create(
        [RemovedKnowledgeBase(tenant_id=tenant_id, kb_id=pk, slug=slug) for pk, slug in knowledge_bases],
        ignore_conflicts=True)
    earlier = RemovedKnowledgeBase.objects.filter(tenant_id=tenant_id)
    if again is not None:
        earlier = earlier.filter(kb_id__in=again)
    kb_ids = sorted({*(pk for pk, _ in knowledge_bases), *earlier.values_list("kb_id", flat=True)})
    transaction.on_commit(lambda: projection.remove_kb_rows(tenant_id, kb_ids))


def move_tenant(sender, *, tenant_id, **kwargs):
    transaction.on_commit(lambda: projection.move_tenant_rows(tenant_id))
