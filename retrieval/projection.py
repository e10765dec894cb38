"""The database → index projection: build rows from chunks and memories, write, delete, rebuild, reconcile.

Every write and delete lands in each build that must have it (retrieval/builds.py): the live one
and, while an online reindex runs, the one it is building, each embedded by its own embedder.
"""

import logging
import time
from contextlib import nullcontext
from dataclasses import replace
from itertools import chain
from typing import Callable, ContextManager, Iterable

import numpy as np

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Q

from loci.backends import embedders
from memory.models import Chunk, Document, Memory
from retrieval import builds, token_vectors
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter, IndexRow
from retrieval.builds import Build, BuildState
from retrieval.embeddings import embedder, identity
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
    """A child chunk's row, with its document's user metadata (load chunks with select_related("document"))."""
    return IndexRow(
        id=chunk_key(chunk.pk),
        tenant_id=tenant_id,
        kb_id=kb_id,
        kind="chunk",
        text=chunk.text,
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
        agent_id=memory.agent_id,
        group_id=memory.group_id,
        run_id=memory.run_id,
        metadata=dict(memory.user_metadata or {}),
    )


def write_rows(rows: list[IndexRow], *, exclusive: bool, progress: Callable[[float], None] | None = None,
               check: "Callable[[list[IndexRow], bool], bool | None] | None" = None,
               targets: list[Build] | None = None, guard: Callable[[], ContextManager] = nullcontext) -> int:
    """Embed (batched, cached by content) and upsert rows into both indexes of every build that must have them.

    `targets` None: the builds the state names at each batch (the live one, and the one a reindex is
    building), read again per batch so a reindex that starts mid-write gets the rest of it.
    `check(written, exclusive)` runs after every batch with every row written so far: it returns
    where the next batch goes (the tenant's isolation may have changed), or None to stop.
    Each batch's upserts into every build, and its check, run inside `guard()`: the index stage
    passes its claim, so a stage that lost its claim, or whose document was deleted, writes no
    further batch (ClaimLost, DocumentGone), and neither a take-over nor a delete commits mid-batch
    (a delete waits for the guard's commit, and its index removal runs after it). The embedding,
    the slow part, comes first, outside the guard, so its transaction stays short.
    """
    written: list[IndexRow] = []
    for start in range(0, len(rows), EMBED_BATCH):
        batch = rows[start:start + EMBED_BATCH]
        embedded = _embed(batch, targets)
        with guard():
            _write_embedded(embedded, exclusive)
            written += batch
            # Under the guard too: the check's own writes (rows moved after an isolation switch) are
            # the stage's writes, refused like the rest once the claim is lost.
            if check is not None:
                exclusive = check(written, exclusive)
        if exclusive is None:
            break
        # Outside the guard, like the embedding: the store keeps only rows whose owner is still there.
        token_vectors.write(batch)
        if progress:
            progress((start + len(batch)) / len(rows))
    return len(written)


def _upsert(rows: list[IndexRow], exclusive: bool, targets: list[Build] | None = None) -> None:
    """Embed rows with each target build's embedder and upsert them into that build's indexes."""
    _write_embedded(_embed(rows, targets), exclusive)


def _embed(rows: list[IndexRow], targets: list[Build] | None = None) -> list[tuple[Build, list[IndexRow]]]:
    """Each target build with the rows embedded by the model its vectors are of (two builds of one
    model embed once; a build of another model than the configured one keeps getting its own)."""
    vectors: dict[str, list] = {}
    out = []
    for n, build in enumerate(targets or builds.current().targets()):
        model = embedder(build=build)
        if model.name not in vectors:
            made = _vectors(model, rows)
            vectors[model.name] = [[float(x) for x in vector] for vector in made]
        if n == 0:  # the caller's rows carry the first target's vectors, as they always have
            for row, vector in zip(rows, vectors[model.name]):
                row.vector = vector
            out.append((build, rows))
        else:
            out.append((build, [replace(row, vector=vector) for row, vector in zip(rows, vectors[model.name])]))
    return out


def _vectors(model, rows: list[IndexRow]):
    """The rows' vectors. With EPISODE_VECTOR "facts", an episode with facts gets the mean of its facts'
    vectors (already embedded for the duplicate check: cache hits) instead of a vector of its
    narrative, whose ~300 tokens were a third of a conversation's embedding CPU (bench/RESULTS.md)."""
    from_facts = _episode_fact_texts(rows) if settings.EPISODE_VECTOR == "facts" else {}
    plain = [r.text for r in rows if r.id not in from_facts]
    made = model.embed_documents(plain + [t for texts in from_facts.values() for t in texts])
    out, plain_at, fact_at = [], 0, len(plain)
    for row in rows:
        if row.id in from_facts:
            n = len(from_facts[row.id])
            mean = made[fact_at:fact_at + n].mean(axis=0)
            out.append(mean / (float(np.linalg.norm(mean)) or 1.0))
            fact_at += n
        else:
            out.append(made[plain_at])
            plain_at += 1
    return out


def _episode_fact_texts(rows: list[IndexRow]) -> dict[str, list[str]]:
    """{episode row id: its facts' indexed texts, every status, in creation order} for episodes with facts."""
    episodes = {r.id.removeprefix("memory:"): r.id for r in rows if r.kind == Memory.Kind.EPISODE}
    if not episodes:
        return {}
    texts: dict[str, list[str]] = {}
    facts = Memory.objects.filter(parent_id__in=list(episodes), kind=Memory.Kind.ATOMIC_FACT).order_by("created_at", "pk")
    for fact in facts:
        texts.setdefault(episodes[str(fact.parent_id)], []).append(row_for_memory(fact).text)
    return texts


def _write_embedded(embedded: list[tuple[Build, list[IndexRow]]], exclusive: bool) -> None:
    for build, rows in embedded:
        vector_index(build=build.number).upsert(rows, exclusive=exclusive)
        keyword_index(build=build.number).upsert(rows, exclusive=exclusive)


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
    rows = []
    for c in document.chunks.filter(level=Chunk.Level.CHILD):
        c.document = document  # its user metadata, without a query per chunk
        rows.append(row_for_chunk(c, tenant_id, kb_id))
    rows += [row_for_memory(m) for m in document.memories.filter(status=Memory.Status.ACTIVE)]
    return rows


def index_document_rows(document: Document, progress=None, guard: Callable[[], ContextManager] = nullcontext) -> int:
    """Write a document's rows; a document deleted meanwhile stops it quietly, its rows removed.

    The index stage passes its claim as `guard` (see write_rows): a document deleted meanwhile then
    stops it at its next batch with DocumentGone, the delete's removal running after the last batch
    written. Without a guard the after-batch check finds it gone, removes its rows and ends the write.
    """
    tenant_id, kb_id = document.kb.tenant_id, document.kb_id
    with guard():  # rows of a previous run (e.g. fewer chunks now) must not linger
        remove_document_rows(tenant_id, kb_id, document.pk)
    return write_rows(document_rows(document), exclusive=_exclusive(document.kb.tenant), progress=progress,
                      check=still_wanted(tenant_id, document_id=document.pk), guard=guard)


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
    token_vectors.delete(flt)  # one place for every build: its rows name their model


def _delete_in(flt: IndexFilter, exclusive: bool) -> None:
    """Delete in one place (shared or exclusive) of every build that must have the delete."""
    flt = replace(flt, exclusive=exclusive)
    for build in builds.current().targets():
        vector_index(build=build.number).delete(flt)
        keyword_index(build=build.number).delete(flt)


def _exclusive(tenant: Tenant) -> bool:
    return tenant.isolation == Tenant.Isolation.EXCLUSIVE


def _rows_of(tenant_id: int, kb_ids, *, exclusive: bool = False, **narrow) -> IndexFilter:
    """The index rows of these KBs of a tenant, whatever their status, narrowed by `narrow`."""
    return IndexFilter(tenant_id=tenant_id, kb_ids=tuple(kb_ids), exclusive=exclusive, statuses=ANY_STATUS, **narrow)


def expected_rows(tenant: Tenant, kb: KnowledgeBase | None = None) -> Iterable[IndexRow]:
    """Every row the indexes should hold for a tenant (or one KB), straight from the database."""
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
        kb_ids = tuple(k.pk for k in kbs)
        written: set[str] = set()
        total += _project((r for k in kbs for r in expected_rows(one, k)), one, log_progress=log_progress,
                          written=written)
        # Only now: a row is replaced in place above, so searches find it throughout.
        one.refresh_from_db(fields=["isolation"])
        scope = _rows_of(one.pk, kb_ids, exclusive=_exclusive(one))
        stale = (set(vector_index().ids(scope)) | set(keyword_index().ids(scope))) - written
        for ids in _batches(sorted(stale)):
            _delete_everywhere(replace(scope, ids=ids))
        # Copies in the place the tenant's isolation does not use (a switch that died half-way).
        _delete_in(_rows_of(one.pk, kb_ids), not _exclusive(one))
    return {"tenants": len(tenants), "rows": total}


def rebuild(*, embedder_alias: str | None = None, log_progress=None) -> dict:
    """Write every row into a new build while searches read the live one, then switch and drop the old.

    While it runs, every other write and delete goes to both builds (write_rows reads the state on
    each batch, removals on each call, after their transaction committed), so nothing committed
    meanwhile is missing from the new build; the scan's own writes re-check the database after each
    batch (`still_wanted`), and a reconcile of the new build just before the switch removes rows
    whose deletion raced with the scan, and rows of deleted knowledge bases.
    """
    with builds.reindex_lock():
        identity.recorded(builds.current().live)  # the old build's model on file before the new one is
        state = builds.current()
        if state.building is not None:  # left by a reindex that died (its lock is free): nobody writes it
            log.warning("dropping build %s, left unfinished by an earlier reindex", state.building.number)
            builds.write(BuildState(live=state.live))
            _drop_build(state.building.number)
        alias = embedder_alias or state.live.embedder
        embedders.backend(alias)  # an unknown alias fails here, before anything is written
        # The alias as configured now: after a change of model (a new default embedder) this is
        # the reindex that moves the indexes to it.
        new = Build(state.live.number + 1, alias, embedder(alias).name)
        _drop_build(new.number)  # leftovers of an attempt that died before recording itself
        builds.write(BuildState(live=state.live, building=new))
        tenants = list(Tenant.objects.all())
        total = 0
        try:
            for one in tenants:
                total += _project(_rows_to_project(one), one, targets=[new], log_progress=log_progress)
            for one in tenants:
                reconcile(one, repair=True, build=new)
            reconcile_removed(repair=True, build=new)
        except BaseException:
            builds.write(BuildState(live=state.live))  # serve and write the old build alone again
            _drop_build(new.number)
            raise
        builds.write(BuildState(live=new))  # the switch: every process's next lookup reads the new build
        if log_progress:
            log_progress(f"switched to build {new.number}; dropping build {state.live.number}")
        time.sleep(float(settings.LOCI_REINDEX_DRAIN_SECONDS))  # searches already under way on the old build
        _drop_build(state.live.number)
        token_vectors.drop_other_models()  # every row of the current model was written by the pass above
    return {"tenants": len(tenants), "rows": total, "build": new.number, "embedder": alias, "model": new.model}


def _drop_build(number: int) -> None:
    vector_index(build=number).drop_all()
    keyword_index(build=number).drop_all()


def _rows_to_project(tenant: Tenant) -> Iterable[IndexRow]:
    """A tenant's expected rows and those of its documents still being indexed: their index stage,
    which sees a change of place (an isolation switch, a new build) only at its next batch, may
    already be past its last one."""
    indexing = Document.objects.filter(kb__tenant=tenant, status=Document.Status.INDEXING)
    return chain(expected_rows(tenant), (row for d in indexing.select_related("kb") for row in document_rows(d)))


def _project(rows: Iterable[IndexRow], tenant: Tenant, *, targets: list[Build] | None = None, log_progress=None,
             written: set[str] | None = None) -> int:
    """Write a tenant's rows in batches, each write re-checked against the database (`still_wanted`)."""

    def write(batch: list[IndexRow]) -> int:
        n = write_rows(batch, exclusive=_exclusive(tenant), check=still_wanted(tenant.pk), targets=targets)
        if written is not None:
            written.update(r.id for r in batch)
        return n

    return _in_batches(rows, write, tenant, log_progress)


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


def move_tenant_rows(tenant_id: int) -> dict:
    """After an isolation switch: write the tenant's rows where its isolation now puts them, then clear the old place.

    The rows are projected again from the database (the embedding cache hands back the vectors the
    first indexing computed), into every build that must have them (during an online reindex, the
    one being built too). Documents still being indexed are written too: their index stage, which
    sees the switch after its next batch, may already be past its last one. Idempotent: run again
    after a crash it finishes the move.
    """
    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return {"tenant": None, "rows": 0}
    kb_ids = tuple(tenant.knowledge_bases.values_list("pk", flat=True))
    if not kb_ids:
        return {"tenant": tenant.slug, "rows": 0}
    written = _project(_rows_to_project(tenant), tenant)
    # Read again: a second switch meanwhile makes the other place the current one, and its own move follows.
    tenant.refresh_from_db(fields=["isolation"])
    _delete_in(_rows_of(tenant.pk, kb_ids), not _exclusive(tenant))
    return {"tenant": tenant.slug, "rows": written}


def reconcile(tenant: Tenant, *, repair: bool = False, build: Build | None = None) -> dict:
    """Compare the database with both indexes (of the live build, or of `build`); with repair, write
    what is missing and drop what is stale.

    Stale rows are rows of the tenant's knowledge bases the database does not hold, rows in the place
    its isolation does not use (left by an isolation switch), and rows of its deleted knowledge bases.
    For a build being written (a reindex's last pass) the rows of documents still being indexed are
    expected too: their index stage writes the rest of them to both builds, and must find the start.
    """
    kb_ids = tuple(tenant.knowledge_bases.values_list("pk", flat=True))
    removed = tuple(RemovedKnowledgeBase.objects.filter(tenant_id=tenant.pk).values_list("kb_id", flat=True))
    report = {"tenant": tenant.slug, "expected": 0}
    rows = expected_rows(tenant) if build is None else _rows_to_project(tenant)
    expected = {row.id: row for row in rows} if kb_ids else {}
    report["expected"] = len(expected)
    here = _exclusive(tenant)
    leftovers = _leftover_filters(tenant.pk, kb_ids, removed, here)
    number = None if build is None else build.number
    missing: dict[str, set[str]] = {}
    for name, index in (("vector", vector_index(build=number)), ("keyword", keyword_index(build=number))):
        present = set(index.ids(_rows_of(tenant.pk, kb_ids, exclusive=here))) if kb_ids else set()
        missing[name], stale = expected.keys() - present, present - expected.keys()
        stale -= _in_play(stale)
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
        write_rows([expected[i] for i in sorted(missing["vector"])], exclusive=here, check=still_wanted(tenant.pk),
                   targets=None if build is None else [build])
    if repair:  # rows only the keyword index lacks need no embedding
        _write_keyword_rows((expected[i] for i in sorted(missing["keyword"] - missing["vector"])), tenant, number)
    report["late_interaction"] = token_vectors.reconcile(expected, tenant.pk, repair=repair)
    fixed = missing["vector"] | missing["keyword"]
    report["repaired"] = bool(repair and (fixed or any(report[n]["stale"] for n in ("vector", "keyword"))
                                         or report["late_interaction"].get("repaired")))
    return report


def reconcile_removed(*, repair: bool = False, build: Build | None = None) -> dict:
    """Rows left in either index (of the live build, or of `build`) of knowledge bases deleted from
    the database (their tenants included)."""
    by_tenant: dict[int, list[int]] = {}
    for tenant_id, kb_id in RemovedKnowledgeBase.objects.values_list("tenant_id", "kb_id"):
        by_tenant.setdefault(tenant_id, []).append(kb_id)
    report = {"removed_knowledge_bases": sum(map(len, by_tenant.values()))}
    number = None if build is None else build.number
    for name, index in (("vector", vector_index(build=number)), ("keyword", keyword_index(build=number))):
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


def _in_play(ids: set[str]) -> set[str]:
    """Of rows about to be called stale, those the database, read again now, still stands behind: of a
    document whose stage is running (its index stage writes them; it removes its own leftovers), or
    expected after all (the document became ready after `expected_rows` read it). Without this, a
    reconcile run while a document finished its index stage reported its rows stale (issue 30)."""
    chunk_pks = sorted(int(i.split(":", 1)[1]) for i in ids if i.startswith("chunk:"))
    memory_pks = sorted(i.split(":", 1)[1] for i in ids if i.startswith("memory:"))
    running = Q(document__status__in=Document.ACTIVE_STATUSES)
    ready = Q(document__status=Document.Status.READY)
    keep = set()
    for batch in _batches(chunk_pks):  # bounded IN lists: a stale set can hold a whole KB
        keep |= {chunk_key(pk) for pk in Chunk.objects.filter(pk__in=batch).filter(
            running | (ready & Q(level=Chunk.Level.CHILD))).values_list("pk", flat=True)}
    expected_memory = Q(status=Memory.Status.ACTIVE) & (ready | Q(document__isnull=True))
    for batch in _batches(memory_pks):
        keep |= {memory_key(pk) for pk in Memory.objects.filter(pk__in=batch).filter(
            running | expected_memory).values_list("pk", flat=True)}
    return keep


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
