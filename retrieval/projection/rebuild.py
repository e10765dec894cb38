"""Rebuilding the projections from the database: one tenant or KB in place, or everything into a new
build switched to when complete (no moment in which searches find nothing); after an upgrade, the
keyword rows of a new analysis."""

import logging
import time
from dataclasses import replace

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from common.backends import embedders
from retrieval import builds, questions
from retrieval.backends import token_codes, token_vectors
from retrieval.backends import keyword_index, vector_index
from retrieval.builds import Build, BuildState
from retrieval.embeddings import embedder, identity
from retrieval import summary_tree
from retrieval.projection.reconcile import reconcile, reconcile_removed
from retrieval.projection.removal import batches, delete_everywhere, delete_in
from retrieval.projection.rows import expected_rows, is_exclusive, rows_of, rows_to_project
from retrieval.projection.writes import project, write_keyword_rows
from tenants.models import KnowledgeBase, Tenant

log = logging.getLogger(__name__)


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
        for k in kbs:  # trees made current first: their nodes are rows of the database like any other
            summary_tree.refresh_tenant(one, k)
        written: set[str] = set()
        total += project((r for k in kbs for r in expected_rows(one, k)), one, log_progress=log_progress,
                          written=written)
        # Only now: a row is replaced in place above, so searches find it throughout.
        one.refresh_from_db(fields=["isolation"])
        scope = rows_of(one.pk, kb_ids, exclusive=is_exclusive(one))
        stale = (set(vector_index().ids(scope)) | set(keyword_index().ids(scope))) - written
        for ids in batches(sorted(stale)):
            delete_everywhere(replace(scope, ids=ids))
        # Copies in the place the tenant's isolation does not use (a switch that died half-way).
        delete_in(rows_of(one.pk, kb_ids), not is_exclusive(one))
        _refit_centroids(one)
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
        new = Build(state.live.number + 1, alias, embedder(alias).name, questions.identity())
        _drop_build(new.number)  # leftovers of an attempt that died before recording itself
        builds.write(BuildState(live=state.live, building=new))
        tenants = list(Tenant.objects.all())
        total = 0
        try:
            for one in tenants:
                # Trees first, by the embedder configured now (a new model clusters anew); their old
                # nodes' rows leave the live build, the new nodes are projected with the rest.
                summary_tree.refresh_tenant(one, index=True)
                total += project(rows_to_project(one), one, targets=[new], log_progress=log_progress)
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
        for one in tenants:
            _refit_centroids(one)
    return {"tenants": len(tenants), "rows": total, "build": new.number, "embedder": alias, "model": new.model}


def _refit_centroids(tenant: Tenant) -> None:
    """The centroid index fitted anew on the vectors now stored (retrieval/backends/token_codes.py)."""
    if token_codes.enabled():
        token_codes.refit(tenant, token_vectors.model().name)


def _drop_build(number: int) -> None:
    vector_index(build=number).drop_all()
    keyword_index(build=number).drop_all()


def refill_empty_keyword_index() -> int:
    """Write the keyword rows of every tenant whose keyword index is empty while its database is not.

    That is what a new keyword analysis (`retrieval.text.ANALYZER_GENERATION`) leaves after an
    upgrade: the new generation's tables start empty. Only the keyword index is written, so nothing
    is embedded again. Returns the number of rows written.
    """
    written = 0
    for tenant in Tenant.objects.all():
        kb_ids = tuple(tenant.knowledge_bases.values_list("pk", flat=True))
        if kb_ids and not keyword_index().count(rows_of(tenant.pk, kb_ids, exclusive=is_exclusive(tenant))):
            written += write_keyword_rows(expected_rows(tenant), tenant)
    return written
