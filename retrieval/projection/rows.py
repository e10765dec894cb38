"""The rows the indexes should hold, built from the database: a chunk's and a memory's row, a
document's rows, a tenant's, and the filter that selects a tenant's rows for a delete or a count."""

from itertools import chain
from typing import Iterable

from django.db.models import Q

from memory.models import Chunk, Document, Memory
from retrieval.backends.base import IndexFilter, IndexRow
from retrieval.projection.questions import with_questions
from retrieval.relevance import script
from tenants.models import KnowledgeBase, Tenant


ANY_STATUS = ()


def chunk_key(pk) -> str:
    return f"chunk:{pk}"


def memory_key(pk) -> str:
    return f"memory:{pk}"


def row_for_chunk(chunk: Chunk, tenant_id: int, kb_id: int) -> IndexRow:
    """A child chunk's row, with its document's user metadata (load chunks with select_related("document"))."""
    return IndexRow(
        id=chunk_key(chunk.pk),
        tenant_id=tenant_id,
        kb_id=kb_id,
        kind="chunk",
        text=chunk.text,
        script=script(chunk.text),
        document_id=chunk.document_id,
        parent_id=chunk_key(chunk.parent_id) if chunk.parent_id else "",
        metadata=dict(chunk.document.user_metadata or {}),
    )


def row_for_memory(memory: Memory) -> IndexRow:
    """The index row of a memory. Its indexed text leads with the topic for an episode, and for a fact
    drawn from a document (its section path, title or file name): a sentence of a document often
    leaves its subject to the heading ("2017年3月5日…品牌正式撤出台湾" under "冰雪皇后"), and a
    question names it. The text shown stays the memory's own. Chat facts name their speaker already."""
    text = memory.text
    in_context = memory.kind in (Memory.Kind.EPISODE, Memory.Kind.SUMMARY) or (memory.kind == Memory.Kind.ATOMIC_FACT and memory.document_id)
    if in_context and memory.topic and memory.topic not in text:
        text = f"{memory.topic}: {text}"
    return IndexRow(
        id=memory_key(memory.pk),
        tenant_id=memory.tenant_id,
        kb_id=memory.kb_id,
        kind=memory.kind,
        text=text,
        script=script(memory.text),  # of its own text, as search reads it (not the topic's)
        document_id=memory.document_id or 0,
        parent_id=memory_key(memory.parent_id) if memory.parent_id else "",
        status=memory.status,
        user_id=memory.user_id,
        session_id=memory.session_id,
        agent_id=memory.agent_id,
        group_id=memory.group_id,
        run_id=memory.run_id,
        metadata=dict(memory.user_metadata or {}),
    )


def document_rows(document: Document) -> list[IndexRow]:
    tenant_id, kb_id = document.kb.tenant_id, document.kb_id
    rows = []
    for c in document.chunks.filter(level=Chunk.Level.CHILD):
        c.document = document  # its user metadata, without a query per chunk
        rows.append(row_for_chunk(c, tenant_id, kb_id))
    rows += [row_for_memory(m) for m in document.memories.filter(status=Memory.Status.ACTIVE)]
    return list(with_questions(rows))


def expected_rows(tenant: Tenant, kb: KnowledgeBase | None = None) -> Iterable[IndexRow]:
    """Every row the indexes should hold for a tenant (or one KB), straight from the database, each
    source's candidate questions (projection/questions.py) after it."""
    return with_questions(_source_rows(tenant, kb))


def _source_rows(tenant: Tenant, kb: KnowledgeBase | None = None) -> Iterable[IndexRow]:
    kbs = [kb] if kb else list(tenant.knowledge_bases.all())
    for one in kbs:
        chunks = Chunk.objects.filter(document__kb=one, level=Chunk.Level.CHILD,
                                      document__status=Document.Status.READY).select_related("document")
        for c in chunks.iterator(chunk_size=1000):
            yield row_for_chunk(c, tenant.pk, one.pk)
        # A document's memories once it is ready (a failed or cancelled one's are kept for a re-run,
        # not searched); a conversation's always.
        memories = Memory.objects.filter(kb=one, status=Memory.Status.ACTIVE).filter(
            Q(document__isnull=True) | Q(document__status=Document.Status.READY)
        )
        for m in memories.iterator(chunk_size=1000):
            yield row_for_memory(m)


def rows_to_project(tenant: Tenant) -> Iterable[IndexRow]:
    """A tenant's expected rows and those of its documents still being indexed: their index stage,
    which sees a change of place (an isolation switch, a new build) only at its next batch, may
    already be past its last one."""
    indexing = Document.objects.filter(kb__tenant=tenant, status=Document.Status.INDEXING)
    return chain(expected_rows(tenant), (row for d in indexing.select_related("kb") for row in document_rows(d)))


def rows_of(tenant_id: int, kb_ids, *, exclusive: bool = False, **narrow) -> IndexFilter:
    """The index rows of these KBs of a tenant, whatever their status, narrowed by `narrow`."""
    return IndexFilter(tenant_id=tenant_id, kb_ids=tuple(kb_ids), exclusive=exclusive, statuses=ANY_STATUS, **narrow)


def is_exclusive(tenant: Tenant) -> bool:
    return tenant.isolation == Tenant.Isolation.EXCLUSIVE
