"""What of the entity store a caller may see: entities only through mentions in memories they may read.

Shared by the API (retrieval/api/entities.py) and the console's entity pages, so both count and show
exactly the same mentions: those in the caller's readable KBs, of active memories.
"""

from django.db.models import Count, Q

from entities.models import Entity, EntityMention
from memory.models import Memory


def readable_mentions(scope):
    return EntityMention.objects.filter(tenant=scope.tenant, kb_id__in=scope.kb_ids,
                                        memory__status=Memory.Status.ACTIVE)


def visible_entities(scope, kb_ids=None):
    """The tenant's entities with at least one readable mention, annotated with their count."""
    kb_ids = scope.kb_ids if kb_ids is None else kb_ids
    readable = Q(mentions__kb_id__in=kb_ids, mentions__memory__status=Memory.Status.ACTIVE)
    return (Entity.objects.filter(tenant=scope.tenant).annotate(mention_count=Count("mentions", filter=readable))
            .filter(mention_count__gt=0))
