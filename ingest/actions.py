"""Writes that span models: create, re-run and delete documents, knowledge bases and tenants."""

import hashlib
import logging
import tempfile
from dataclasses import dataclass

from django.core.files import File
from django.db import IntegrityError, transaction
from django.db.models import Q

from memory.models import Chunk, Document, Memory, MemoryHistory
from tenants.access import Scope
from tenants.models import KnowledgeBase, Tenant

log = logging.getLogger(__name__)


@dataclass
class Upload:
    document: Document
    duplicate: bool


def ingest_document(scope: Scope, kb: KnowledgeBase, fileobj, filename: str, *, content_type: str = "") -> Upload:
    """Store the original, compute its sha256 and queue processing on commit; a known file is reported."""
    scope.require_kb(kb.pk)
    filename = (filename or "upload").replace("\\", "/").rsplit("/", 1)[-1][:500] or "upload"
    with tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024) as spool:
        digest, size = hashlib.sha256(), 0
        for block in iter(lambda: fileobj.read(1024 * 1024), b""):
            digest.update(block)
            spool.write(block)
            size += len(block)
        sha256 = digest.hexdigest()
        existing = Document.objects.filter(kb=kb, sha256=sha256).first()
        if existing is not None:
            return Upload(existing, True)
        spool.seek(0)
        document = Document(kb=kb, filename=filename, sha256=sha256, size=size, content_type=content_type[:200],
                            uploaded_by=scope.actor)
        document.original.save(filename, File(spool), save=False)
    try:
        with transaction.atomic():
            document.save()
            transaction.on_commit(lambda: _queue(document.pk))
    except IntegrityError:  # the same file uploaded concurrently: the other request won
        return Upload(Document.objects.get(kb=kb, sha256=sha256), True)
    return Upload(document, False)


def rerun_document(scope: Scope, document: Document) -> Document:
    """Queue a finished (failed or ready) document again from the start."""
    scope.require_kb(document.kb_id)
    updated = Document.objects.filter(pk=document.pk, status__in=[Document.Status.FAILED, Document.Status.READY]).update(
        status=Document.Status.QUEUED, progress=0, stage="queued", error="", finished_at=None
    )
    if updated:
        document.attempts += 1
        document.save(update_fields=["attempts"])
        transaction.on_commit(lambda: _queue(document.pk))
    document.refresh_from_db()
    return document


# --- Deletes. One action per scope, used by every entry point (API, console, Django admin,
# `manage.py delete`). Each owns its transaction: the database rows go first, and the index rows
# and stored originals after the commit, so a rolled-back delete never loses index rows and a
# committed one always removes them. Each takes ids from its argument up front and schedules the
# removal even when the database rows were already gone, so it is safe to run twice or to finish a
# half-done delete. A write to the indexes still under way checks the database after each batch
# (`retrieval.projection.still_wanted`), which covers the writes the removal raced with.

def delete_document(scope: Scope, document: Document) -> None:
    """Remove a document, its chunks and memories from the database and every index; keep an audit trail."""
    from retrieval.projection import remove_document_rows

    scope.require_kb(document.kb_id)
    document_id, kb_id, tenant_id = document.pk, document.kb_id, document.kb.tenant_id
    storage, name = document.original.storage, document.original.name
    with transaction.atomic():
        _record_deletions(scope, Memory.objects.filter(document_id=document_id),
                          reason=f"document {document.filename} deleted")
        Document.objects.filter(pk=document_id).delete()
        transaction.on_commit(lambda: remove_document_rows(tenant_id, kb_id, document_id))
        transaction.on_commit(lambda: _delete_file(storage, name))


def delete_chunks(chunks) -> None:
    """Remove chunks (a parent takes its children along) from the database and every index (the Django admin)."""
    from retrieval.projection import remove_chunk_rows

    pks = {c.pk for c in chunks}
    with transaction.atomic():
        doomed = list(Chunk.objects.filter(Q(pk__in=pks) | Q(parent_id__in=pks))
                      .values_list("pk", "document__kb_id", "document__kb__tenant_id"))
        Chunk.objects.filter(pk__in=[pk for pk, _, _ in doomed]).delete()
        by_kb: dict[tuple[int, int], list[int]] = {}
        for pk, kb_id, tenant_id in doomed:
            by_kb.setdefault((tenant_id, kb_id), []).append(pk)
        transaction.on_commit(lambda: [remove_chunk_rows(t, k, p) for (t, k), p in by_kb.items()])


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
    """Inside the caller's transaction: tombstone the KBs, delete them, remove their rows and files on commit.

    `again` names KB ids (None: every one of the tenant) whose rows are removed again if an earlier
    delete already removed them from the database: that finishes a delete whose removal failed.
    """
    from retrieval.models import RemovedKnowledgeBase
    from retrieval.projection import remove_kb_rows

    found = list(kbs.values_list("pk", "slug"))
    kb_ids = [pk for pk, _ in found]
    files = [(d.original.storage, d.original.name) for d in Document.objects.filter(kb_id__in=kb_ids).only("original")]
    # The tombstone outlives the KB so `reconcile` can still find rows a failed removal left behind.
    RemovedKnowledgeBase.objects.bulk_create(
        [RemovedKnowledgeBase(tenant_id=tenant_id, kb_id=pk, slug=slug) for pk, slug in found], ignore_conflicts=True)
    earlier = RemovedKnowledgeBase.objects.filter(tenant_id=tenant_id)
    if again is not None:
        earlier = earlier.filter(kb_id__in=again)
    kb_ids = sorted({*kb_ids, *earlier.values_list("kb_id", flat=True)})
    kbs.delete()
    transaction.on_commit(lambda: remove_kb_rows(tenant_id, kb_ids))
    transaction.on_commit(lambda: [_delete_file(s, n) for s, n in files])


def _record_deletions(scope: Scope, memories, reason: str) -> None:
    MemoryHistory.objects.bulk_create(
        [
            MemoryHistory(memory_id=m.id, tenant_id=m.tenant_id, event=MemoryHistory.Event.DELETE, old_text=m.text,
                          old_status=m.status, actor=scope.actor, reason=reason[:300])
            for m in memories.only("id", "tenant_id", "text", "status")
        ],
        batch_size=500,
    )


def _queue(document_id: int) -> None:
    from ingest.tasks import process_document_stage

    try:
        process_document_stage.delay(document_id, "parse")
    except Exception:  # broker down: the document stays queued; `ingest --wait` or a re-run picks it up
        log.exception("could not queue document %s", document_id)


def _delete_file(storage, name):
    try:
        if name and storage.exists(name):
            storage.delete(name)
    except OSError:
        log.warning("could not delete stored original %s", name)
