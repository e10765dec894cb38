"""Writing index rows: embedded in batches into every build that must have them, each batch checked
against the database afterwards (`still_wanted`); a document's rows, memories' rows, a tenant's rows.

Every write lands in each build that must have it (retrieval/builds.py): the live one and, while an
online reindex runs, the one it is building, each embedded by its own embedder.
"""

import logging
from contextlib import nullcontext
from dataclasses import replace
from typing import Callable, ContextManager, Iterable

import numpy as np
from django.conf import settings

from memory.models import Chunk, Document, Memory
from retrieval import builds
from retrieval.backends import token_vectors
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexRow
from retrieval.builds import Build
from retrieval.embeddings import embedder
from retrieval.projection.questions import source_key, with_questions
from retrieval.projection.removal import delete_in, remove_document_rows, remove_ids, remove_memory_rows
from retrieval.projection.rows import chunk_key, document_rows, is_exclusive, memory_key, row_for_memory, rows_of
from tenants.models import Tenant

log = logging.getLogger(__name__)


EMBED_BATCH = 64


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


def upsert(rows: list[IndexRow], exclusive: bool, targets: list[Build] | None = None) -> None:
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
            remove_ids(tenant_id, written)
            return None
        unwanted = _unwanted(written[-EMBED_BATCH:])
        if unwanted:
            remove_ids(tenant_id, [r for r in written if r.id in unwanted])
            written[:] = [r for r in written if r.id not in unwanted]
        now = isolation == Tenant.Isolation.EXCLUSIVE
        if now != exclusive and written:
            # The switch re-projects from the database and clears the old place, maybe before our
            # rows landed there: put what this write produced where the tenant now reads.
            upsert(written, now)
            delete_in(rows_of(tenant_id, {r.kb_id for r in written}, ids=tuple(r.id for r in written)), exclusive)
        return now

    return check


def _unwanted(rows: list[IndexRow]) -> set[str]:
    """Ids of rows whose source the database no longer holds (or no longer indexes); a candidate
    question goes with its source."""
    sources = {r.id: source_key(r.id) for r in rows}
    chunk_pks = {int(s.split(":", 1)[1]) for s in sources.values() if s.startswith("chunk:")}
    memory_pks = {s.split(":", 1)[1] for s in sources.values() if s.startswith("memory:")}
    kept = {chunk_key(pk) for pk in Chunk.objects.filter(pk__in=chunk_pks).values_list("pk", flat=True)}
    kept |= {memory_key(pk) for pk in Memory.objects.filter(pk__in=memory_pks, status=Memory.Status.ACTIVE)
             .values_list("pk", flat=True)}
    return {i for i, s in sources.items() if s.startswith(("chunk:", "memory:")) and s not in kept}


def index_document_rows(document: Document, progress=None, guard: Callable[[], ContextManager] = nullcontext) -> int:
    """Write a document's rows; a document deleted meanwhile stops it quietly, its rows removed.

    The index stage passes its claim as `guard` (see write_rows): a document deleted meanwhile then
    stops it at its next batch with DocumentGone, the delete's removal running after the last batch
    written. Without a guard the after-batch check finds it gone, removes its rows and ends the write.
    """
    tenant_id, kb_id = document.kb.tenant_id, document.kb_id
    with guard():  # rows of a previous run (e.g. fewer chunks now) must not linger
        remove_document_rows(tenant_id, kb_id, document.pk)
    return write_rows(document_rows(document), exclusive=is_exclusive(document.kb.tenant), progress=progress,
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
        active = list(with_questions(row_for_memory(m) for m in group if m.status == Memory.Status.ACTIVE))
        written += write_rows(active, exclusive=is_exclusive(tenant), check=still_wanted(tenant_id))
    return written


def project(rows: Iterable[IndexRow], tenant: Tenant, *, targets: list[Build] | None = None, log_progress=None,
             written: set[str] | None = None) -> int:
    """Write a tenant's rows in batches, each write re-checked against the database (`still_wanted`)."""

    def write(batch: list[IndexRow]) -> int:
        n = write_rows(batch, exclusive=is_exclusive(tenant), check=still_wanted(tenant.pk), targets=targets)
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


def write_keyword_rows(rows: Iterable[IndexRow], tenant: Tenant, build: int | None = None) -> int:
    batch, written = [], 0
    for row in rows:
        batch.append(row)
        if len(batch) == 512:
            keyword_index(build=build).upsert(batch, exclusive=is_exclusive(tenant))
            written, batch = written + len(batch), []
    if batch:
        keyword_index(build=build).upsert(batch, exclusive=is_exclusive(tenant))
    return written + len(batch)


def row_vectors(rows: list[IndexRow]) -> list:
    """The rows' vectors under the configured embedder, as indexing makes them (the cache answers for
    rows already written): the summary tree clusters episodes by these."""
    return _vectors(embedder(), rows)
