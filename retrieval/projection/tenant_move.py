"""Moving a tenant's rows after an isolation switch (shared index ↔ its own)."""

from retrieval.projection.removal import delete_in
from retrieval.projection.rows import is_exclusive, rows_of, rows_to_project
from retrieval.projection.writes import project
from tenants.models import Tenant


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
    written = project(rows_to_project(tenant), tenant)
    # Read again: a second switch meanwhile makes the other place the current one, and its own move follows.
    tenant.refresh_from_db(fields=["isolation"])
    delete_in(rows_of(tenant.pk, kb_ids), not is_exclusive(tenant))
    return {"tenant": tenant.slug, "rows": written}
