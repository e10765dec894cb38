"""The database → index projection: build rows from chunks and memories, write, delete, rebuild, reconcile."""

import logging
from contextlib import nullcontext
from typing import Callable, ContextManager, Iterable

from ingest.models import Chunk, Document, Memory
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter, IndexRow
from retrieval.embeddings import embedder
from tenants.models import KnowledgeBase, Tenant

log = logging.getLogger(__name__)

EMBED_BATCH = 64
ANY_STATUS = ()


def chunk_key(pk) -> str:
    return f"chunk:{pk}"


def memory_key(pk) -> str:
    return f"memory:{pk}"


def row_for_chunk(chunk: Chunk, tenant_id: int, kb_id: int) -> IndexRow:
    return IndexRow(
        id=chunk_key(chunk.pk),
        tenant_id=tenant_id,
        kb_id=kb_id,
        kind="chunk",
        text=chunk.text,
        document_id=chunk.document_id,
        parent_id=chunk_key(chunk.parent_id) if chunk.parent_id else "",
    )


def row_for_memory(memory: Memory) -> IndexRow:
    """The index row of a memory. Its indexed text leads with the topic for an episode, and for a fact
    drawn from a document (its section path, title or file name): a sentence of a document often
    leaves its subject to the heading ("2017年3月5日…品牌正式撤出台湾" under "冰雪皇后"), and a
    question names it. The text shown stays the memory's own. Chat facts name their speaker already."""
    text = memory.text
    in_context = memory.kind == Memory.Kind.EPISODE or (memory.kind == Memory.Kind.ATOMIC_FACT and memory.document_id)
    if in_context and memory.topic and memory.topic not in text:
        text = f"{memory.topic}: {text}"
    return IndexRow(
        id=memory_key(memory.pk),
        tenant_id=memory.tenant_id,
        kb_id=memory.kb_id,
        kind=memory.kind,
        text=text,
        document_id=memory.document_id or 0,
        parent_id=memory_key(memory.parent_id) if memory.parent_id else "",
        status=memory.status,
        user_id=memory.user_id,
        session_id=memory.session_id,
    )


def write_rows(rows: list[IndexRow], *, exclusive: bool, progress: Callable[[float], None] | None = None,
               guard: Callable[[], ContextManager] = nullcontext) -> int:
    """Embed (batched, cached by content) and upsert rows into both indexes.

    Each batch is written inside `guard()`: the index stage passes its claim, so a stage that lost
    its claim writes no further batch (it raises ClaimLost), and no take-over starts mid-batch.
    """
    model = embedder()
    for start in range(0, len(rows), EMBED_BATCH):
        batch = rows[start:start + EMBED_BATCH]
        vectors = model.embed_documents([r.text for r in batch])  # slow: outside the guard
        for row, vector in zip(batch, vectors):
            row.vector = [float(x) for x in vector]
        with guard():
            vector_index().upsert(batch, exclusive=exclusive)
            keyword_index().upsert(batch, exclusive=exclusive)
        if progress:
            progress((start + len(batch)) / len(rows))
    return len(rows)


def document_rows(document: Document) -> list[IndexRow]:
    tenant_id, kb_id = document.kb.tenant_id, document.kb_id
    rows = [row_for_chunk(c, tenant_id, kb_id) for c in document.chunks.filter(level=Chunk.Level.CHILD)]
    rows += [row_for_memory(m) for m in document.memories.filter(status=Memory.Status.ACTIVE)]
    return rows


def index_document_rows(document: Document, progress=None, guard: Callable[[], ContextManager] = nullcontext) -> int:
    with guard():
        remove_document_rows(document)  # rows of a previous run (e.g. fewer chunks now) must not linger
    return write_rows(document_rows(document), exclusive=_exclusive(document.kb.tenant), progress=progress,
                      guard=guard)


def index_memories(memories: Iterable[Memory]) -> int:
    """Upsert active memories and remove the rest (disabled, superseded) from both indexes."""
    memories = list(memories)
    by_tenant: dict[int, list[Memory]] = {}
    for m in memories:
        by_tenant.setdefault(m.tenant_id, []).append(m)
    written = 0
    for tenant_id, group in by_tenant.items():
        tenant = Tenant.objects.get(pk=tenant_id)
        inactive = [m for m in group if m.status != Memory.Status.ACTIVE]
        if inactive:
            remove_memory_rows(inactive)
        active = [row_for_memory(m) for m in group if m.status == Memory.Status.ACTIVE]
        written += write_rows(active, exclusive=_exclusive(tenant))
    return written


def remove_memory_rows(memories: Iterable[Memory]) -> None:
    memories = list(memories)
    if not memories:
        return
    _delete_everywhere(_rows_of(memories[0].tenant, {m.kb_id for m in memories},
                                ids=tuple(memory_key(m.pk) for m in memories)))


def remove_document_rows(document: Document) -> None:
    _delete_everywhere(_rows_of(document.kb.tenant, (document.kb_id,), document_ids=(document.pk,)))


def remove_kb_rows(kb: KnowledgeBase) -> None:
    _delete_everywhere(_rows_of(kb.tenant, (kb.pk,)))


def remove_scope_rows(tenant: Tenant, kb_ids, *, user_id=None, session_id=None) -> None:
    _delete_everywhere(_rows_of(tenant, kb_ids, user_id=user_id, session_id=session_id))


def _delete_everywhere(flt: IndexFilter) -> None:
    vector_index().delete(flt)
    keyword_index().delete(flt)


def _exclusive(tenant: Tenant) -> bool:
    return tenant.isolation == Tenant.Isolation.EXCLUSIVE


def _rows_of(tenant: Tenant, kb_ids, **narrow) -> IndexFilter:
    """The index rows of these KBs of a tenant, whatever their status, narrowed by `narrow`."""
    return IndexFilter(tenant_id=tenant.pk, kb_ids=tuple(kb_ids), exclusive=_exclusive(tenant), statuses=ANY_STATUS,
                       **narrow)


def expected_rows(tenant: Tenant, kb: KnowledgeBase | None = None) -> Iterable[IndexRow]:
    """Every row the indexes should hold for a tenant (or one KB), straight from the database."""
    kbs = [kb] if kb else list(tenant.knowledge_bases.all())
    for one in kbs:
        chunks = Chunk.objects.filter(document__kb=one, level=Chunk.Level.CHILD, document__status=Document.Status.READY)
        for c in chunks.iterator(chunk_size=1000):
            yield row_for_chunk(c, tenant.pk, one.pk)
        memories = Memory.objects.filter(kb=one, status=Memory.Status.ACTIVE).exclude(
            document__isnull=False, document__status__in=Document.ACTIVE_STATUSES
        )
        for m in memories.iterator(chunk_size=1000):
            yield row_for_memory(m)


def reindex(tenant: Tenant | None = None, kb: KnowledgeBase | None = None, *, log_progress=None) -> dict:
    """Rebuild both projections from the database for every tenant, one tenant, or one KB."""
    tenants = [kb.tenant] if kb else ([tenant] if tenant else list(Tenant.objects.all()))
    total = 0
    for one in tenants:
        kbs = [kb] if kb else list(one.knowledge_bases.all())
        if not kbs:
            continue
        _delete_everywhere(_rows_of(one, (k.pk for k in kbs)))
        batch: list[IndexRow] = []
        for row in (r for k in kbs for r in expected_rows(one, k)):
            batch.append(row)
            if len(batch) >= 512:
                total += write_rows(batch, exclusive=_exclusive(one))
                batch = []
                if log_progress:
                    log_progress(f"{one.slug}: {total} rows")
        if batch:
            total += write_rows(batch, exclusive=_exclusive(one))
    return {"tenants": len(tenants), "rows": total}


def reconcile(tenant: Tenant, *, repair: bool = False) -> dict:
    """Compare the database with both indexes; with repair, write what is missing and drop what is stale."""
    kb_ids = tuple(tenant.knowledge_bases.values_list("pk", flat=True))
    report = {"tenant": tenant.slug, "expected": 0}
    if not kb_ids:
        return {**report, "vector": {"missing": 0, "stale": 0}, "keyword": {"missing": 0, "stale": 0}}
    expected = {row.id: row for row in expected_rows(tenant)}
    report["expected"] = len(expected)
    flt = _rows_of(tenant, kb_ids)
    missing: dict[str, set[str]] = {}
    for name, index in (("vector", vector_index()), ("keyword", keyword_index())):
        present = set(index.ids(flt))
        missing[name], stale = expected.keys() - present, present - expected.keys()
        report[name] = {"missing": len(missing[name]), "stale": len(stale),
                        "sample_missing": sorted(missing[name])[:5], "sample_stale": sorted(stale)[:5]}
        if repair and stale:
            index.delete(_rows_of(tenant, kb_ids, ids=tuple(stale)))
    if repair and missing["vector"]:
        write_rows([expected[i] for i in sorted(missing["vector"])], exclusive=_exclusive(tenant))
    if repair:  # rows only the keyword index lacks need no embedding
        _write_keyword_rows((expected[i] for i in sorted(missing["keyword"] - missing["vector"])), tenant)
    fixed = missing["vector"] | missing["keyword"]
    report["repaired"] = bool(repair and (fixed or any(report[n]["stale"] for n in ("vector", "keyword"))))
    return report


def refill_empty_keyword_index() -> int:
    """Write the keyword rows of every tenant whose keyword index is empty while its database is not.

    That is what a new keyword analysis (`retrieval.text.ANALYZER_GENERATION`) leaves after an
    upgrade: the new generation's tables start empty. Only the keyword index is written, so nothing
    is embedded again. Returns the number of rows written.
    """
    written = 0
    for tenant in Tenant.objects.all():
        kb_ids = tuple(tenant.knowledge_bases.values_list("pk", flat=True))
        if kb_ids and not keyword_index().count(_rows_of(tenant, kb_ids)):
            written += _write_keyword_rows(expected_rows(tenant), tenant)
    return written


def _write_keyword_rows(rows: Iterable[IndexRow], tenant: Tenant) -> int:
    batch, written = [], 0
    for row in rows:
        batch.append(row)
        if len(batch) == 512:
            keyword_index().upsert(batch, exclusive=_exclusive(tenant))
            written, batch = written + len(batch), []
    if batch:
        keyword_index().upsert(batch, exclusive=_exclusive(tenant))
    return written + len(batch)
