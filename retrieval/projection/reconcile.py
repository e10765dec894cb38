"""Comparing the database with the indexes: what is missing, what is stale; with repair, fixed."""

from django.db.models import Q

from memory.models import Chunk, Document, Memory
from retrieval.backends import token_codes, token_vectors
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter
from retrieval.builds import Build
from retrieval.models import RemovedKnowledgeBase
from retrieval import summary_tree
from retrieval.projection.questions import source_key
from retrieval.projection.removal import batches
from retrieval.projection.rows import chunk_key, expected_rows, is_exclusive, memory_key, rows_of, rows_to_project
from retrieval.projection.writes import still_wanted, write_keyword_rows, write_rows
from tenants.models import Tenant


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
    rows = expected_rows(tenant) if build is None else rows_to_project(tenant)
    expected = {row.id: row for row in rows} if kb_ids else {}
    report["expected"] = len(expected)
    here = is_exclusive(tenant)
    leftovers = _leftover_filters(tenant.pk, kb_ids, removed, here)
    number = None if build is None else build.number
    missing: dict[str, set[str]] = {}
    for name, index in (("vector", vector_index(build=number)), ("keyword", keyword_index(build=number))):
        present = set(index.ids(rows_of(tenant.pk, kb_ids, exclusive=here))) if kb_ids else set()
        missing[name], stale = expected.keys() - present, present - expected.keys()
        stale -= _in_play(stale)
        elsewhere = sorted(i for flt in leftovers for i in index.ids(flt))
        report[name] = {"missing": len(missing[name]), "stale": len(stale) + len(elsewhere),
                        "sample_missing": sorted(missing[name])[:5], "sample_stale": sorted(stale | set(elsewhere))[:5]}
        if repair and stale:
            for chunk in batches(sorted(stale)):
                index.delete(rows_of(tenant.pk, kb_ids, exclusive=here, ids=chunk))
        if repair and elsewhere:
            for flt in leftovers:
                index.delete(flt)
    if repair and missing["vector"]:
        write_rows([expected[i] for i in sorted(missing["vector"])], exclusive=here, check=still_wanted(tenant.pk),
                   targets=None if build is None else [build])
    if repair:  # rows only the keyword index lacks need no embedding
        write_keyword_rows((expected[i] for i in sorted(missing["keyword"] - missing["vector"])), tenant, number)
    report["late_interaction"] = token_vectors.reconcile(expected, tenant.pk, repair=repair)
    # After the vectors' repair (codes are of stored vectors); a reindex refits them itself afterwards.
    report["centroid_index"] = (token_codes.reconcile(tenant, token_vectors.model().name, repair=repair)
                                if build is None and token_codes.enabled() else {"enabled": token_codes.enabled()})
    # The trees are rows of the database, compared above like every memory; here, whether they are
    # the trees their episodes make now (a reindex's own pass has made them current already).
    report["summary_trees"] = summary_tree.check(tenant, repair=repair) if build is None else {"out_of_date": 0}
    fixed = missing["vector"] | missing["keyword"]
    report["repaired"] = bool(repair and (fixed or any(report[n]["stale"] for n in ("vector", "keyword"))
                                         or report["late_interaction"].get("repaired")
                                         or report["centroid_index"].get("repaired")
                                         or report["summary_trees"].get("repaired")))
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
    sources = {i: source_key(i) for i in ids}  # a candidate question is in play with its source
    chunk_pks = sorted({int(s.split(":", 1)[1]) for s in sources.values() if s.startswith("chunk:")})
    memory_pks = sorted({s.split(":", 1)[1] for s in sources.values() if s.startswith("memory:")})
    running = Q(document__status__in=Document.ACTIVE_STATUSES)
    ready = Q(document__status=Document.Status.READY)
    keep = set()
    for batch in batches(chunk_pks):  # bounded IN lists: a stale set can hold a whole KB
        keep |= {chunk_key(pk) for pk in Chunk.objects.filter(pk__in=batch).filter(
            running | (ready & Q(level=Chunk.Level.CHILD))).values_list("pk", flat=True)}
    expected_memory = Q(status=Memory.Status.ACTIVE) & (ready | Q(document__isnull=True))
    for batch in batches(memory_pks):
        keep |= {memory_key(pk) for pk in Memory.objects.filter(pk__in=batch).filter(
            running | expected_memory).values_list("pk", flat=True)}
    return {i for i, s in sources.items() if s in keep}


def _leftover_filters(tenant_id: int, kb_ids, removed_kb_ids, here: bool) -> list[IndexFilter]:
    """Where no row of the tenant should be: the other place for live KBs, both places for removed ones."""
    flts = [rows_of(tenant_id, kb_ids, exclusive=not here)] if kb_ids else []
    if removed_kb_ids:
        flts += [rows_of(tenant_id, removed_kb_ids, exclusive=e) for e in (False, True)]
    return flts
