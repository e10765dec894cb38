"""The database → index projection: build rows from chunks and memories, write, delete, rebuild, reconcile."""

import logging
from dataclasses import replace
from itertools import chain
from typing import Callable, Iterable

from memory.models import Chunk, Document, Memory
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter, IndexRow
from retrieval.embeddings import embedder
from retrieval.models import RemovedKnowledgeBase
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
               check: "Callable[[list[IndexRow], bool], bool | None] | None" = None) -> int:
    """Embed (batched, cached by content) and upsert rows into both indexes.

    `check(written, exclusive)` runs after every batch with every row written so far: it returns
    where the next batch goes (the tenant's isolation may have changed), or None to stop.
    """
    model = embedder()
    written: list[IndexRow] = []
    for start in range(0, len(rows), EMBED_BATCH):
        batch = rows[start:start + EMBED_BATCH]
        vectors = model.embed_documents([r.text for r in batch])
        for row, vector in zip(batch, vectors):
            row.vector = [float(x) for x in vector]
        _upsert(batch, exclusive)
        written += batch
        if check is not None:
            exclusive = check(written, exclusive)
            if exclusive is None:
                break
        if progress:
            progress((start + len(batch)) / len(rows))
    return len(written)


def _upsert(rows: list[IndexRow], exclusive: bool) -> None:
    vector_index().upsert(rows, exclusive=exclusive)
    keyword_index().upsert(rows, exclusive=exclusive)


def still_wanted(tenant_id: int, *, document_id: int | None = None):
    """The `check` of `write_rows` for rows of one tenant (and one document): the database has the last word.

    A delete removes index rows after its commit; a write that was under way then (an index stage,
    the on-commit indexing of a conversation, a reindex) may land after that removal. So after each
    batch the writer looks again: rows whose chunk or memory is gone (or no longer active) are taken
    out again, a document found gone stops the write with its rows removed, a deleted tenant stops it,
    and rows written in the old place of a tenant whose isolation was switched meanwhile are moved to
    the new one. Either the delete's removal runs after a write, or the write's own check sees the
    delete: whatever the interleaving, no row of a deleted source stays.
    """

    def check(written: list[IndexRow], exclusive: bool) -> bool | None:
        if document_id is not None and not Document.objects.filter(pk=document_id).exists():
            remove_document_rows(tenant_id, written[0].kb_id, document_id)
            log.info("document %s was deleted while being indexed; its index rows are removed", document_id)
            return None
        isolation = Tenant.objects.filter(pk=tenant_id).values_list("isolation", flat=True).first()
        if isolation is None:
            _remove_ids(tenant_id, written)
            return None
        unwanted = _unwanted(written[-EMBED_BATCH:])
        if unwanted:
            _remove_ids(tenant_id, [r for r in written if r.id in unwanted])
            written[:] = [r for r in written if r.id not in unwanted]
        now = isolation == Tenant.Isolation.EXCLUSIVE
        if now != exclusive and written:
            # The switch re-projects from the database and clears the old place, maybe before our
            # rows landed there: put what this write produced where the tenant now reads.
            _upsert(written, now)
            _delete_in(_rows_of(tenant_id, {r.kb_id for r in written}, ids=tuple(r.id for r in written)), exclusive)
        return now

    return check


def _unwanted(rows: list[IndexRow]) -> set[str]:
    """Ids of rows whose source the database no longer holds (or no longer indexes)."""
    chunk_pks = {int(r.id.split(":", 1)[1]): r.id for r in rows if r.id.startswith("chunk:")}
    memory_pks = {r.id.split(":", 1)[1]: r.id for r in rows if r.id.startswith("memory:")}
    kept = {chunk_key(pk) for pk in Chunk.objects.filter(pk__in=chunk_pks).values_list("pk", flat=True)}
    kept |= {memory_key(pk) for pk in Memory.objects.filter(pk__in=memory_pks, status=Memory.Status.ACTIVE)
             .values_list("pk", flat=True)}
    return (set(chunk_pks.values()) | set(memory_pks.values())) - kept


def document_rows(document: Document) -> list[IndexRow]:
    tenant_id, kb_id = document.kb.tenant_id, document.kb_id
    rows = [row_for_chunk(c, tenant_id, kb_id) for c in document.chunks.filter(level=Chunk.Level.CHILD)]
    rows += [row_for_memory(m) for m in document.memories.filter(status=Memory.Status.ACTIVE)]
    return rows


def index_document_rows(document: Document, progress=None) -> int:
    """Write a document's rows; a document deleted meanwhile stops it quietly, its rows removed."""
    tenant_id, kb_id = document.kb.tenant_id, document.kb_id
    remove_document_rows(tenant_id, kb_id, document.pk)  # rows of a previous run (e.g. fewer chunks now) must not linger
    return write_rows(document_rows(document), exclusive=_exclusive(document.kb.tenant), progress=progress,
                      check=still_wanted(tenant_id, document_id=document.pk))


def index_memories(memories: Iterable[Memory]) -> int:
    """Upsert active memories and remove the rest (disabled, superseded) from both indexes."""
    memories = list(memories)
    by_tenant: dict[int, list[Memory]] = {}
    for m in memories:
        by_tenant.setdefault(m.tenant_id, []).append(m)
    written = 0
    for tenant_id, group in by_tenant.items():
        tenant = Tenant.objects.filter(pk=tenant_id).first()
        inactive = [m for m in group if m.status != Memory.Status.ACTIVE]
        if inactive or tenant is None:
            remove_memory_rows(tenant_id, {m.kb_id for m in group}, [m.pk for m in (group if tenant is None else inactive)])
        if tenant is None:
            continue
        active = [row_for_memory(m) for m in group if m.status == Memory.Status.ACTIVE]
        written += write_rows(active, exclusive=_exclusive(tenant), check=still_wanted(tenant_id))
    return written


# --- Removal. Every removal clears both places, the shared set and the tenant's exclusive one: a
# tenant's rows may sit in either (an isolation switch under way, or one that died half-way), and a
# delete must not depend on which. Each takes ids, not model instances, so it can run after the
# commit that deleted the rows it is named after, and running it again removes nothing more.

REMOVE_BATCH = 500  # ids per delete call: a Milvus expression and an SQL IN list stay small


def remove_memory_rows(tenant_id: int, kb_ids, memory_pks) -> None:
    for ids in _batches([memory_key(pk) for pk in memory_pks]):
        _delete_everywhere(_rows_of(tenant_id, kb_ids, ids=ids))


def remove_chunk_rows(tenant_id: int, kb_id: int, chunk_pks) -> None:
    for ids in _batches([chunk_key(pk) for pk in chunk_pks]):
        _delete_everywhere(_rows_of(tenant_id, (kb_id,), ids=ids))


def remove_document_rows(tenant_id: int, kb_id: int, document_id: int) -> None:
    _delete_everywhere(_rows_of(tenant_id, (kb_id,), document_ids=(document_id,)))


def remove_kb_rows(tenant_id: int, kb_ids) -> None:
    """Every row of these knowledge bases (of a tenant that may itself be gone)."""
    if kb_ids:
        _delete_everywhere(_rows_of(tenant_id, kb_ids))


def remove_scope_rows(tenant_id: int, kb_ids, *, user_id=None, session_id=None) -> None:
    if kb_ids:
        _delete_everywhere(_rows_of(tenant_id, kb_ids, user_id=user_id, session_id=session_id))


def _remove_ids(tenant_id: int, rows: list[IndexRow]) -> None:
    by_kb: dict[int, list[str]] = {}
    for r in rows:
        by_kb.setdefault(r.kb_id, []).append(r.id)
    for kb_id, ids in by_kb.items():
        for chunk in _batches(ids):
            _delete_everywhere(_rows_of(tenant_id, (kb_id,), ids=chunk))


def _delete_everywhere(flt: IndexFilter) -> None:
    for exclusive in (False, True):
        _delete_in(flt, exclusive)


def _delete_in(flt: IndexFilter, exclusive: bool) -> None:
    flt = replace(flt, exclusive=exclusive)
    vector_index().delete(flt)
    keyword_index().delete(flt)


def _exclusive(tenant: Tenant) -> bool:
    return tenant.isolation == Tenant.Isolation.EXCLUSIVE


def _rows_of(tenant_id: int, kb_ids, *, exclusive: bool = False, **narrow) -> IndexFilter:
    """The index rows of these KBs of a tenant, whatever their status, narrowed by `narrow`."""
    return IndexFilter(tenant_id=tenant_id, kb_ids=tuple(kb_ids), exclusive=exclusive, statuses=ANY_STATUS, **narrow)


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
        _delete_everywhere(_rows_of(one.pk, (k.pk for k in kbs)))
        total += _project((r for k in kbs for r in expected_rows(one, k)), one,
                          log_progress=log_progress and (lambda n, one=one: log_progress(f"{one.slug}: {n} rows")))
    return {"tenants": len(tenants), "rows": total}


def _project(rows: Iterable[IndexRow], tenant: Tenant, *, log_progress=None) -> int:
    batch, total = [], 0
    for row in rows:
        batch.append(row)
        if len(batch) >= 512:
            total += write_rows(batch, exclusive=_exclusive(tenant), check=still_wanted(tenant.pk))
            batch = []
            if log_progress:
                log_progress(total)
    if batch:
        total += write_rows(batch, exclusive=_exclusive(tenant), check=still_wanted(tenant.pk))
    return total


def move_tenant_rows(tenant_id: int) -> dict:
    """After an isolation switch: write the tenant's rows where its isolation now puts them, then clear the old place.

    The rows are projected again from the database (the embedding cache hands back the vectors the
    first indexing computed). Documents still being indexed are written too: their index stage,
    which sees the switch after its next batch, may already be past its last one. Idempotent: run
    again after a crash it finishes the move.
    """
    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return {"tenant": None, "rows": 0}
    kb_ids = tuple(tenant.knowledge_bases.values_list("pk", flat=True))
    if not kb_ids:
        return {"tenant": tenant.slug, "rows": 0}
    indexing = Document.objects.filter(kb__tenant=tenant, status=Document.Status.INDEXING)
    rows = chain(expected_rows(tenant), (row for d in indexing.select_related("kb") for row in document_rows(d)))
    written = _project(rows, tenant)
    # Read again: a second switch meanwhile makes the other place the current one, and its own move follows.
    tenant.refresh_from_db(fields=["isolation"])
    _delete_in(_rows_of(tenant.pk, kb_ids), not _exclusive(tenant))
    return {"tenant": tenant.slug, "rows": written}


def reconcile(tenant: Tenant, *, repair: bool = False) -> dict:
    """Compare the database with both indexes; with repair, write what is missing and drop what is stale.

    Stale rows are rows of the tenant's knowledge bases the database does not hold, rows in the place
    its isolation does not use (left by an isolation switch), and rows of its deleted knowledge bases.
    """
    kb_ids = tuple(tenant.knowledge_bases.values_list("pk", flat=True))
    removed = tuple(RemovedKnowledgeBase.objects.filter(tenant_id=tenant.pk).values_list("kb_id", flat=True))
    report = {"tenant": tenant.slug, "expected": 0}
    expected = {row.id: row for row in expected_rows(tenant)} if kb_ids else {}
    report["expected"] = len(expected)
    here = _exclusive(tenant)
    leftovers = _leftover_filters(tenant.pk, kb_ids, removed, here)
    missing: dict[str, set[str]] = {}
    for name, index in (("vector", vector_index()), ("keyword", keyword_index())):
        present = set(index.ids(_rows_of(tenant.pk, kb_ids, exclusive=here))) if kb_ids else set()
        missing[name], stale = expected.keys() - present, present - expected.keys()
        elsewhere = sorted(i for flt in leftovers for i in index.ids(flt))
        report[name] = {"missing": len(missing[name]), "stale": len(stale) + len(elsewhere),
                        "sample_missing": sorted(missing[name])[:5], "sample_stale": sorted(stale | set(elsewhere))[:5]}
        if repair and stale:
            for chunk in _batches(sorted(stale)):
                index.delete(_rows_of(tenant.pk, kb_ids, exclusive=here, ids=chunk))
        if repair and elsewhere:
            for flt in leftovers:
                index.delete(flt)
    if repair and missing["vector"]:
        write_rows([expected[i] for i in sorted(missing["vector"])], exclusive=here, check=still_wanted(tenant.pk))
    if repair:  # rows only the keyword index lacks need no embedding
        _write_keyword_rows((expected[i] for i in sorted(missing["keyword"] - missing["vector"])), tenant)
    fixed = missing["vector"] | missing["keyword"]
    report["repaired"] = bool(repair and (fixed or any(report[n]["stale"] for n in ("vector", "keyword"))))
    return report


def reconcile_removed(*, repair: bool = False) -> dict:
    """Rows left in either index of knowledge bases deleted from the database (their tenants included)."""
    by_tenant: dict[int, list[int]] = {}
    for tenant_id, kb_id in RemovedKnowledgeBase.objects.values_list("tenant_id", "kb_id"):
        by_tenant.setdefault(tenant_id, []).append(kb_id)
    report = {"removed_knowledge_bases": sum(map(len, by_tenant.values()))}
    for name, index in (("vector", vector_index()), ("keyword", keyword_index())):
        stale = []
        for tenant_id, kb_ids in by_tenant.items():
            for flt in _leftover_filters(tenant_id, (), kb_ids, False):
                found = list(index.ids(flt))
                stale += found
                if repair and found:
                    index.delete(flt)
        report[name] = {"missing": 0, "stale": len(stale), "sample_stale": sorted(stale)[:5]}
    report["repaired"] = bool(repair and (report["vector"]["stale"] or report["keyword"]["stale"]))
    return report


def _leftover_filters(tenant_id: int, kb_ids, removed_kb_ids, here: bool) -> list[IndexFilter]:
    """Where no row of the tenant should be: the other place for live KBs, both places for removed ones."""
    flts = [_rows_of(tenant_id, kb_ids, exclusive=not here)] if kb_ids else []
    if removed_kb_ids:
        flts += [_rows_of(tenant_id, removed_kb_ids, exclusive=e) for e in (False, True)]
    return flts


def _batches(ids: list[str]) -> Iterable[tuple[str, ...]]:
    for start in range(0, len(ids), REMOVE_BATCH):
        yield tuple(ids[start:start + REMOVE_BATCH])


def refill_empty_keyword_index() -> int:
    """Write the keyword rows of every tenant whose keyword index is empty while its database is not.

    That is what a new keyword analysis (`retrieval.text.ANALYZER_GENERATION`) leaves after an
    upgrade: the new generation's tables start empty. Only the keyword index is written, so nothing
    is embedded again. Returns the number of rows written.
    """
    written = 0
    for tenant in Tenant.objects.all():
        kb_ids = tuple(tenant.knowledge_bases.values_list("pk", flat=True))
        if kb_ids and not keyword_index().count(_rows_of(tenant.pk, kb_ids, exclusive=_exclusive(tenant))):
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
