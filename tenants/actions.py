"""Writes to a tenant that span more than its own row."""

import logging

from django.db import transaction

from tenants import signals
from tenants.models import Tenant

log = logging.getLogger(__name__)


def set_isolation(tenant: Tenant, isolation: str, *, actor: str) -> Tenant:
    """Switch a tenant between shared and exclusive isolation; after the commit its index rows move.

    The switch commits first, so every index write from then on goes to the new place and searches
    read there; the move (`retrieval.projection.move_tenant_rows`, told by tenants/signals.py) then
    writes the tenant's rows there from the database and clears the old place. Until it ends, searches of the tenant find only what
    was already moved. Called again with the same isolation it runs the move again, which finishes
    a move that died half-way.
    """
    if isolation not in Tenant.Isolation.values:
        raise ValueError(f"isolation must be one of {', '.join(Tenant.Isolation.values)}, got {isolation!r}")
    with transaction.atomic():
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        previous = locked.isolation
        if previous != isolation:
            locked.isolation = isolation
            locked.save(update_fields=["isolation"])
        signals.isolation_set.send(Tenant, tenant_id=locked.pk)
    log.info("tenant %s: isolation %s -> %s by %s", locked.slug, previous, isolation, actor)
    tenant.isolation = isolation
    return locked
