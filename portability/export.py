"""Write a tenant's, a knowledge base's or a user's memories with their history, sources and scopes."""

from collections.abc import Iterator

from django.utils import timezone

from memory.models import Chunk, Document, Memory, MemoryHistory, Message
from portability.records import FORMAT, VERSION, dumps, original_record, row_record
from tenants.access import Scope

BATCH = 1000


def export_lines(scope: Scope, *, kb_ids=None, user_id: str | None = None, originals: bool = False) -> Iterator[str]:
    """The export of what `scope` may read, narrowed to `kb_ids` and/or one user, as JSON lines.

    A user's export holds the user's messages and memories and only the documents and chunks their
    memories cite; a KB's or tenant's holds every document and chunk. Originals (base64) only when asked.
    """
    kb_ids = sorted(scope.kb_ids if kb_ids is None else set(kb_ids) & scope.kb_ids)
    memories = Memory.objects.filter(tenant=scope.tenant, kb_id__in=kb_ids)
    messages = Message.objects.filter(tenant=scope.tenant, kb_id__in=kb_ids)
    documents = Document.objects.filter(kb_id__in=kb_ids)
    if user_id is not None:
        memories, messages = memories.filter(user_id=user_id), messages.filter(user_id=user_id)
        documents = documents.filter(pk__in=memories.exclude(document=None).values("document_id"))
    yield dumps({"type": FORMAT, "version": VERSION, "exported_at": timezone.now().isoformat(),
                 "tenant": scope.tenant.slug, "user_id": user_id,
                 "counts": {"documents": documents.count(), "messages": messages.count(),
                            "memories": memories.count()}})
    for kb in scope.knowledge_bases().filter(id__in=kb_ids).order_by("id"):
        yield dumps(row_record("knowledge_base", kb))
    for document in documents.order_by("id").iterator(BATCH):
        yield dumps(row_record("document", document))
        if originals and document.original:
            try:
                with document.original.open("rb") as handle:
                    yield dumps(original_record(document.pk, document.filename, handle.read()))
            except (FileNotFoundError, ValueError):
                pass  # the import says which documents came without their original
    chunks = Chunk.objects.filter(document__in=documents)
    for level in (Chunk.Level.PARENT, Chunk.Level.CHILD):
        for chunk in chunks.filter(level=level).order_by("id").iterator(BATCH):
            yield dumps(row_record("chunk", chunk))
    for message in messages.order_by("id").iterator(BATCH):
        yield dumps(row_record("message", message))
    sources: dict = {}
    for memory_id, chunk_id in Memory.source_chunks.through.objects.filter(memory_id__in=memories.values("id")) \
            .values_list("memory_id", "chunk_id").iterator(BATCH):
        sources.setdefault(memory_id, []).append(chunk_id)
    for parents_first in (True, False):
        for memory in memories.filter(parent__isnull=parents_first).order_by("created_at", "id").iterator(BATCH):
            yield dumps(row_record("memory", memory, source_chunk_ids=sorted(sources.get(memory.pk, []))))
    history = MemoryHistory.objects.filter(tenant=scope.tenant, memory_id__in=memories.values("id"))
    for row in history.order_by("id").iterator(BATCH):
        yield dumps(row_record("history", row))
