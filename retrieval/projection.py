"""The database → index projection: build rows from chunks and memories, write, delete, rebuild, reconcile.

Every write and delete lands in each build that must have it (retrieval/builds.py): the live one
and, while an online reindex runs, the one it is building, each embedded by its own embedder.
"""

import logging
import time
from dataclasses import replace
from typing import Callable, Iterable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from ingest.models import Chunk, Document, Memory
from loci.backends import embedders
from retrieval import builds
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter, IndexRow
from retrieval.builds import Build, BuildState
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


def write_rows(rows: list[IndexRow], *, exclusive: bool, progress: Callable[[float], None] | None = None) -> int:
    """Embed (batched, cached by content) and upsert rows into both indexes of every build that must have them."""
    return _write(rows, builds.current().targets(), exclusive=exclusive, progress=progress)


def _write(rows: list[IndexRow], targets: list[Build], *, exclusive: bool, progress=None) -> int:
    for start in range(0, len(rows), EMBED_BATCH):
        batch = rows[start:start + EMBED_BATCH]
        vectors: dict[str, list] = {}  # by embedder alias: two builds of one model embed once
        for n, build in enumerate(targets):
            if build.embedder not in vectors:
                made = embedder(build.embedder).embed_documents([r.text for r in batch])
                vectors[build.embedder] = [[float(x) for x in vector] for vector in made]
            if n == 0:  # the caller's rows carry the first target's vectors, as they always have
                for row, vector in zip(batch, vectors[build.embedder]):
                    row.vector = vector
                rows_here = batch
            else:
                rows_here = [replace(row, vector=vector) for row, vector in zip(batch, vectors[build.embedder])]
            vector_index(build=build.number).upsert(rows_here, exclusive=exclusive)
            keyword_index(build=build.number).upsert(rows_here, exclusive=exclusive)
        if progress:
            progress((start + len(batch)) / len(rows))
    return len(rows)


def document_rows(document: Document) -> list[IndexRow]:
    tenant_id, kb_id = document.kb.tenant_id, document.kb_id
    rows = [row_for_chunk(c, tenant_id, kb_id) for c in document.chunks.filter(level=Chunk.Level.CHILD)]
    rows += [row_for_memory(m) for m in document.memories.filter(status=Memory.Status.ACTIVE)]
    return rows


def index_document_rows(document: Document, progress=None) -> int:
    remove_document_rows(document)  # rows of a previous run (e.g. fewer chunks now) must not linger
    return write_rows(document_rows(document), exclusive=_exclusive(document.kb.tenant), progress=progress)


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
    for build in builds.current().targets():
        vector_index(build=build.number).delete(flt)
        keyword_index(build=build.number).delete(flt)


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


def reindex(tenant: Tenant | None = None, kb: KnowledgeBase | None = None, *, embedder_alias: str | None = None,
            log_progress=None) -> dict:
    """Rebuild both projections from the database, with no moment in which searches find nothing.

    For everything: a new build (`rebuild`), embedded by `embedder_alias` (default: the live
    build's), switched to when complete. For one tenant or KB: its rows rewritten in place, then
    those the database no longer has removed (the same embedder, so old and new rows compare).
    """
    if tenant is None and kb is None:
        return rebuild(embedder_alias=embedder_alias, log_progress=log_progress)
    if embedder_alias not in (None, builds.current().live.embedder):
        raise ImproperlyConfigured("a new embedder needs a rebuild of everything: reindex without --tenant/--kb")
    tenants = [kb.tenant] if kb else [tenant]
    total = 0
    for one in tenants:
        kbs = [kb] if kb else list(one.knowledge_bases.all())
        if not kbs:
            continue
        written: set[str] = set()

        def write(batch, one=one):
            written.update(r.id for r in batch)
            return write_rows(batch, exclusive=_exclusive(one))

        total += _in_batches((r for k in kbs for r in expected_rows(one, k)), write, one, log_progress)
        # Only now: a row is replaced in place above, so searches find it throughout.
        scope = _rows_of(one, (k.pk for k in kbs))
        stale = (set(vector_index().ids(scope)) | set(keyword_index().ids(scope))) - written
        if stale:
            _delete_everywhere(replace(scope, ids=tuple(sorted(stale))))
    return {"tenants": len(tenants), "rows": total}


def rebuild(*, embedder_alias: str | None = None, log_progress=None) -> dict:
    """Write every row into a new build while searches read the live one, then switch and drop the old.

    While it runs, every other write and delete goes to both builds (write_rows reads the state on
    each call, after its transaction committed), so nothing committed meanwhile is missing from the
    new build; a reconcile of the new build just before the switch removes rows whose deletion
    raced with the scan.
    """
    with builds.reindex_lock():
        state = builds.current()
        if state.building is not None:  # left by a reindex that died (its lock is free): nobody writes it
            log.warning("dropping build %s, left unfinished by an earlier reindex", state.building.number)
            builds.write(BuildState(live=state.live))
            _drop_build(state.building.number)
        alias = embedder_alias or state.live.embedder
        embedders.backend(alias)  # an unknown alias fails here, before anything is written
        new = Build(state.live.number + 1, alias)
        _drop_build(new.number)  # leftovers of an attempt that died before recording itself
        builds.write(BuildState(live=state.live, building=new))
        tenants = list(Tenant.objects.all())
        total = 0
        try:
            for one in tenants:
                kbs = list(one.knowledge_bases.all())
                rows = (r for k in kbs for r in expected_rows(one, k))
                total += _in_batches(rows, lambda batch, one=one: _write(batch, [new], exclusive=_exclusive(one)),
                                     one, log_progress)
            for one in tenants:
                reconcile(one, repair=True, build=new)
        except BaseException:
            builds.write(BuildState(live=state.live))  # serve and write the old build alone again
            _drop_build(new.number)
            raise
        builds.write(BuildState(live=new))  # the switch: every process's next lookup reads the new build
        if log_progress:
            log_progress(f"switched to build {new.number}; dropping build {state.live.number}")
        time.sleep(float(settings.LOCI_REINDEX_DRAIN_SECONDS))  # searches already under way on the old build
        _drop_build(state.live.number)
    return {"tenants": len(tenants), "rows": total, "build": new.number, "embedder": alias}


def _drop_build(number: int) -> None:
    vector_index(build=number).drop_all()
    keyword_index(build=number).drop_all()


def _in_batches(rows: Iterable[IndexRow], write: Callable[[list[IndexRow]], int], tenant: Tenant, log_progress) -> int:
    batch: list[IndexRow] = []
    total = 0
    for row in rows:
        batch.append(row)
        if len(batch) >= 512:
            total += write(batch)
            batch = []
            if log_progress:
                log_progress(f"{tenant.slug}: {total} rows")
    if batch:
        total += write(batch)
    return total


def reconcile(tenant: Tenant, *, repair: bool = False, build: Build | None = None) -> dict:
    """Compare the database with both indexes (of the live build, or of `build`); with repair, write
    what is missing and drop what is stale."""
    kb_ids = tuple(tenant.knowledge_bases.values_list("pk", flat=True))
    report = {"tenant": tenant.slug, "expected": 0}
    if not kb_ids:
        return {**report, "vector": {"missing": 0, "stale": 0}, "keyword": {"missing": 0, "stale": 0}}
    expected = {row.id: row for row in expected_rows(tenant)}
    report["expected"] = len(expected)
    flt = _rows_of(tenant, kb_ids)
    number = None if build is None else build.number
    missing: dict[str, set[str]] = {}
    for name, index in (("vector", vector_index(build=number)), ("keyword", keyword_index(build=number))):
        present = set(index.ids(flt))
        missing[name], stale = expected.keys() - present, present - expected.keys()
        report[name] = {"missing": len(missing[name]), "stale": len(stale),
                        "sample_missing": sorted(missing[name])[:5], "sample_stale": sorted(stale)[:5]}
        if repair and stale:
            index.delete(_rows_of(tenant, kb_ids, ids=tuple(stale)))
    if repair and missing["vector"]:
        rows = [expected[i] for i in sorted(missing["vector"])]
        if build is None:
            write_rows(rows, exclusive=_exclusive(tenant))
        else:
            _write(rows, [build], exclusive=_exclusive(tenant))
    if repair:  # rows only the keyword index lacks need no embedding
        _write_keyword_rows((expected[i] for i in sorted(missing["keyword"] - missing["vector"])), tenant, number)
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


def _write_keyword_rows(rows: Iterable[IndexRow], tenant: Tenant, build: int | None = None) -> int:
    batch, written = [], 0
    for row in rows:
        batch.append(row)
        if len(batch) == 512:
            keyword_index(build=build).upsert(batch, exclusive=_exclusive(tenant))
            written, batch = written + len(batch), []
    if batch:
        keyword_index(build=build).upsert(batch, exclusive=_exclusive(tenant))
    return written + len(batch)
