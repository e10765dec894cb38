"""What of the entity store a caller may see: entities only through mentions in memories they may read.

Shared by the API (retrieval/api/entities.py) and the console's entity pages, so both count and show
exactly the same mentions: those in the caller's readable KBs, of active memories.
"""

from django.db.models import Count, Q

from entities.models import Entity, EntityMention
from memory.models import CaseCluster, Memory


def readable_mentions(scope):
    return EntityMention.objects.filter(tenant=scope.tenant, kb_id__in=scope.kb_ids,
                                        memory__status=Memory.Status.ACTIVE)


def visible_entities(scope, kb_ids=None):
    """The tenant's entities with at least one readable mention, annotated with their count."""
    kb_ids = scope.kb_ids if kb_ids is None else kb_ids
    readable = Q(mentions__kb_id__in=kb_ids, mentions__memory__status=Memory.Status.ACTIVE)
    return (Entity.objects.filter(tenant=scope.tenant).annotate(mention_count=Count("mentions", filter=readable))
            .filter(mention_count__gt=0))


def agent_memories(scope, entity, limit: int) -> tuple[list[Memory], list[Memory]]:
    """(cases, skills) linked to `entity` that the caller may read: the agent cases naming it or whose
    episode names it, newest first, and the skills learnt from those cases (or naming it themselves).

    A skill is written from its cluster's cases, not extracted from a MemCell, so it is reached
    through the cases of its cluster (memory.CaseCluster), few per user and agent.
    """
    readable = Memory.objects.filter(tenant=scope.tenant, kb_id__in=scope.kb_ids, status=Memory.Status.ACTIVE)
    named = readable_mentions(scope).filter(entity=entity).values("memory_id")
    cases = list(readable.filter(kind=Memory.Kind.AGENT_CASE).filter(Q(pk__in=named) | Q(parent_id__in=named))
                 .select_related("kb").order_by("-occurred_at", "-created_at")[:limit])
    case_ids = {str(c.pk) for c in cases}
    skill_ids = set(readable.filter(kind=Memory.Kind.AGENT_SKILL, pk__in=named).values_list("pk", flat=True))
    scopes = Q(pk__in=[])
    for kb_id, user_id, agent_id in {(c.kb_id, c.user_id, c.agent_id) for c in cases}:
        scopes |= Q(kb_id=kb_id, user_id=user_id, agent_id=agent_id)
    for skill_id, members in CaseCluster.objects.filter(scopes, tenant=scope.tenant, skill__isnull=False).values_list(
            "skill_id", "case_ids"):
        if case_ids & set(members):
            skill_ids.add(skill_id)
    skills = list(readable.filter(kind=Memory.Kind.AGENT_SKILL, pk__in=skill_ids).select_related("kb")
                  .order_by("-occurred_at")[:limit])
    return cases, skills
