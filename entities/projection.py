"""The entity projection: mentions derived from the memories' text (and the LLM's recorded lists).

Rebuilt from the database by `reindex`, compared with it by `reconcile` (missing and stale
mentions, entities no memory names), and removed with the memories by every delete path (the
mention rows cascade with their memory; signals.py prunes the entities left unnamed).
"""

from entities.actions import _slot, link_memories, mentions_of, prune_orphans
from entities.models import Entity, EntityMention
from memory.models import Memory
from tenants.models import KnowledgeBase, Tenant

BATCH = 500  # episodes per pass, with their facts


def _episode_batches(tenant: Tenant, kb: KnowledgeBase | None):
    """Root memories (episodes, and facts without one) of a tenant or KB, in batches of ids."""
    roots = Memory.objects.filter(tenant=tenant, parent__isnull=True)
    if kb is not None:
        roots = roots.filter(kb=kb)
    ids = list(roots.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), BATCH):
        yield ids[start:start + BATCH]


def _members(root_ids) -> list[Memory]:
    from django.db.models import Q

    return list(Memory.objects.filter(Q(pk__in=root_ids) | Q(parent_id__in=root_ids)))


def rebuild_entities(tenant: Tenant, kb: KnowledgeBase | None = None) -> dict:
    """Link every memory of the tenant (or KB) again, then drop the entities nobody names."""
    written = 0
    for root_ids in _episode_batches(tenant, kb):
        written += link_memories(_members(root_ids))
    pruned = prune_orphans([tenant.pk])
    return {"tenant": tenant.slug, "mentions": written, "pruned": pruned}


def reconcile_entities(tenant: Tenant, *, repair: bool = False) -> dict:
    """Compare the stored mentions with what the memories name; with repair, link the drifted groups again."""
    drifted: set = set()
    missing = stale = 0
    for root_ids in _episode_batches(tenant, None):
        members = _members(root_ids)
        expected = {(m_pk, slot) for m_pk, pairs in mentions_of(members).items()
                    for key, f, _ in pairs if key for slot in [_slot(key, f)]}
        stored = set()
        for memory_id, etype, key in EntityMention.objects.filter(memory__in=members).values_list(
                "memory_id", "entity__type", "entity__key"):
            stored.add((memory_id, ("named", key) if etype in Entity.NAMED else (etype, key)))
        for memory_id, _ in expected ^ stored:
            drifted.add(memory_id)
        missing += len(expected - stored)
        stale += len(stored - expected)
    orphans = Entity.objects.filter(tenant=tenant, mentions__isnull=True).count()
    report = {"tenant": tenant.slug, "missing": missing, "stale": stale, "orphans": orphans}
    if repair and (drifted or orphans):
        if drifted:
            link_memories(list(Memory.objects.filter(pk__in=drifted)))
        prune_orphans([tenant.pk])
    report["repaired"] = bool(repair and (drifted or orphans))
    return report
