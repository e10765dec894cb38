"""Deletes of documents, chunks, knowledge bases and tenants: from the database, every index and storage.

The indexes are `retrieval`'s, which the core may not import: each action sends a memory/signals.py
signal inside its transaction, and retrieval removes the index rows after the commit.
"""

import logging

from django.db import transaction
from django.db.models import Q

from memory import signals
from memory.models import Chunk, Document, Memory, MemoryHistory
from tenants.access import Scope
from tenants.models import KnowledgeBase, Tenant

log = logging.getLogger(__name__)


# --- Deletes. One action per scope, used by every entry point (API, console, Django admin,
# `manage.py delete`). Each owns its transaction: the database rows go first, and the index rows
# and stored originals after the commit, so a rolled-back delete never loses index rows and a
# committed one always removes them. Each takes ids from its argument up front and schedules the
# removal even when the database rows were already gone, so it is safe to run twice or to finish a
# half-done delete. A write to the indexes still under way checks the database after each batch
# (`retrieval.projection.still_wanted`), which covers the writes the removal raced with.

def delete_document(scope: Scope, document: Document) -> None:
    """Remove a document, its chunks and memories from the database and every index; keep an audit trail."""
    scope.require_kb(document.kb_id)
    document_id, kb_id, tenant_id = document.pk, document.kb_id, document.kb.tenant_id
    storage, name = document.original.storage, document.original.name
    with transaction.atomic():
        _record_deletions(scope, Memory.objects.filter(document_id=document_id),
                          reason=f"document {document.filename} deleted")
        Document.objects.filter(pk=document_id).delete()
        signals.document_deleted.send(Document, tenant_id=tenant_id, kb_id=kb_id, document_id=document_id)
        transaction.on_commit(lambda: _delete_file(storage, name))


def delete_chunks(chunks) -> None:
    """Remove chunks (a parent takes its children along) from the database and every index (the Django admin)."""
    pks = {c.pk for c in chunks}
    with transaction.atomic():
        doomed = list(Chunk.objects.filter(Q(pk__in=pks) | Q(parent_id__in=pks))
                      .values_list("pk", "document__kb_id", "document__kb__tenant_id"))
        Chunk.objects.filter(pk__in=[pk for pk, _, _ in doomed]).delete()
        by_kb: dict[tuple[int, int], list[int]] = {}
        for pk, kb_id, tenant_id in doomed:
            by_kb.setdefault((tenant_id, kb_id), []).append(pk)
        for (tenant_id, kb_id), chunk_ids in by_kb.items():
            signals.chunks_deleted.send(Chunk, tenant_id=tenant_id, kb_id=kb_id, chunk_ids=chunk_ids)


def delete_knowledge_base(scope: Scope, kb: KnowledgeBase) -> None:
    """Remove a knowledge base with everything in it, from the database and every index."""
    scope.require_kb(kb.pk)
    with transaction.atomic():
        _record_deletions(scope, Memory.objects.filter(kb_id=kb.pk), reason=f"knowledge base {kb.slug} deleted")
        _delete_knowledge_bases(kb.tenant_id, KnowledgeBase.objects.filter(pk=kb.pk), again=[kb.pk])


def delete_tenant(tenant: Tenant, *, actor: str) -> None:
    """Remove a tenant with every knowledge base, document, memory, message and key, from the database and every index.

    Platform staff only (the Django admin, `manage.py delete`): no tenant member may do it. The
    tenant's memory history goes with it, so the audit record is this log line.
    """
    tenant_id, slug = tenant.pk, tenant.slug
    with transaction.atomic():
        _delete_knowledge_bases(tenant_id, KnowledgeBase.objects.filter(tenant_id=tenant_id), again=None)
        Tenant.objects.filter(pk=tenant_id).delete()
    log.warning("tenant %s (id %s) deleted by %s", slug, tenant_id, actor)


def _delete_knowledge_bases(tenant_id: int, kbs, *, again) -> None:
    """Inside the caller's transaction: delete the KBs, their files on commit; the indexes are told (see signals).

    `again` names KB ids (None: every one of the tenant) whose rows are removed again if an earlier
    delete already removed them from the database: that finishes a delete whose removal failed.
    """
    found = list(kbs.values_list("pk", "slug"))
    files = [(d.original.storage, d.original.name)
             for d in Document.objects.filter(kb_id__in=[pk for pk, _ in found]).only("original")]
    signals.knowledge_bases_deleted.send(KnowledgeBase, tenant_id=tenant_id, knowledge_bases=found, again=again)
    kbs.delete()
    transaction.on_commit(lambda: [_delete_file(s, n) for s, n in files])


def _record_deletions(scope: Scope, memories, reason: str) -> None:
    MemoryHistory.objects.bulk_create(
        [
            MemoryHistory(memory_id=m.id, tenant_id=m.tenant_id, kb_id=m.kb_id, event=MemoryHistory.Event.DELETE,
                          old_text=m.text, old_status=m.status, actor=scope.actor, reason=reason[:300])
            for m in memories.only("id", "tenant_id", "kb_id", "text", "status")
        ],
        batch_size=500,
    )


def _delete_file(storage, name):
    try:
        if name and storage.exists(name):
            storage.delete(name)
    except OSError:
        log.warning("could not delete stored original %s", name)
