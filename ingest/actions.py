"""Ingest's entry points: create a document from an upload and re-run one, each queueing the pipeline on commit.

Each action owns its transaction; a caller need not (and should not) wrap it. Deletes are the core's
(memory/actions.py).
"""

import hashlib
import logging
import tempfile
from dataclasses import dataclass

from django.conf import settings
from django.core.files import File
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from ingest.tasks import process_document_stage
from memory import signals
from memory.models import Document
from tenants.access import Scope
from tenants.models import KnowledgeBase

log = logging.getLogger(__name__)
# The stage a cancelled document is left at (its status is failed, its error says who cancelled it).
CANCELLED_STAGE = "cancelled"


@dataclass
class Upload:
    document: Document
    duplicate: bool


def ingest_document(scope: Scope, kb: KnowledgeBase, fileobj, filename: str, *, content_type: str = "",
                    metadata: dict | None = None) -> Upload:
    """Store the original, compute its sha256 and queue processing on commit; a known file is reported
    (and keeps its metadata). `metadata`: the caller's checked user metadata (memory.user_metadata)."""
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
                            uploaded_by=scope.actor, user_metadata=metadata or {})
        document.original.save(filename, File(spool), save=False)
    try:
        with transaction.atomic():
            document.save()
            transaction.on_commit(lambda: _queue(document.pk))
    except IntegrityError:  # the same file uploaded concurrently: the other request won
        return Upload(Document.objects.get(kb=kb, sha256=sha256), True)
    return Upload(document, False)


def rerun_document(scope: Scope, document: Document) -> Document:
    """Queue a finished (failed or ready) or stalled document again from the start.

    Stalled: unfinished and not moved for a lease. Its claim is dropped, so a holder that is in fact
    still alive finds every further write refused and stops.
    """
    scope.require_kb(document.kb_id)
    stale = timezone.now() - timezone.timedelta(seconds=settings.LOCI_STAGE_LEASE_SECONDS)
    rerunnable = Q(status__in=[Document.Status.FAILED, Document.Status.READY]) | Q(
        status__in=Document.ACTIVE_STATUSES, updated_at__lt=stale)
    with transaction.atomic():
        updated = Document.objects.filter(rerunnable, pk=document.pk).update(
            status=Document.Status.QUEUED, progress=0, stage="queued", error="", finished_at=None, claim_token=None,
            # This attempt's duration starts at its own first stage, not at the first attempt's.
            started_at=None, retryable=True, updated_at=timezone.now()
        )
        if updated:
            document.attempts += 1
            document.save(update_fields=["attempts"])
            transaction.on_commit(lambda: _queue(document.pk))
    document.refresh_from_db()
    return document


def cancel_document(scope: Scope, document: Document) -> bool:
    """Stop a queued or running document: it fails with "Cancelled by <actor>" and may be re-run later.

    Clearing the claim token is what stops a running stage: its next guarded write (progress,
    chunks, memories, the index's batches) finds the claim gone and the stage stops without writing;
    a queued stage's message finds nothing to claim. False when the document had already finished.
    """
    scope.require_kb(document.kb_id)
    now = timezone.now()
    with transaction.atomic():
        updated = Document.objects.filter(pk=document.pk, status__in=Document.ACTIVE_STATUSES).update(
            status=Document.Status.FAILED, stage=CANCELLED_STAGE, error=f"Cancelled by {_who(scope.actor)}"[:2000],
            claim_token=None, retryable=True, finished_at=now, updated_at=now,
        )
        if updated:  # the batches an index stage had written go too (after the commit: it stops writing)
            signals.document_withdrawn.send(Document, tenant_id=document.kb.tenant_id, kb_id=document.kb_id,
                                            document_id=document.pk)
    document.refresh_from_db()
    if updated:
        log.info("document %s cancelled by %s", document.pk, scope.actor)
    return bool(updated)


def _who(actor: str) -> str:
    """'user:alice' -> 'alice', 'key:ab12' -> 'API key ab12'."""
    kind, _, name = actor.partition(":")
    return f"API key {name}" if kind == "key" else (name or actor)


def _queue(document_id: int) -> None:
    try:
        process_document_stage.delay(document_id, "parse")
    except Exception:  # broker down: the document stays queued; `ingest --wait` or a re-run picks it up
        log.exception("could not queue document %s", document_id)
