"""Console pages for knowledge about people and things: entities (with aliases, mentions and memories)
and conversation users' profiles. They read through the same scoped queries as the API
(retrieval/api/entities.py, conversations/api/profiles.py), so a page never shows what GET /api/v1/… would not."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.utils.dateparse import parse_datetime

from console.shell import console_scope, render_page
from entities.models import Entity
from entities.resolution import entity_key
from memory.models import Memory
from entities.visibility import agent_memories, readable_mentions, visible_entities
from retrieval.api.entities import MAX_MEMORIES, MAX_QUERY
from retrieval.search.memory_kinds import profile_item

ENTITIES_PER_PAGE = 50
MAX_PROFILE_ITEMS = 500


@login_required
def entity_list(request):
    scope = console_scope(request)
    params = request.GET
    qs = visible_entities(scope)
    kind = params.get("type", "")
    if kind in Entity.Type.values:
        qs = qs.filter(type=kind)
    q = params.get("q", "").strip()[:MAX_QUERY]
    if q:
        key = entity_key(q) or q.casefold()
        qs = qs.filter(pk__in=Entity.objects.filter(tenant=scope.tenant, aliases__key__contains=key).values("pk"))
    page = Paginator(qs.order_by("-mention_count", "name", "pk"), ENTITIES_PER_PAGE).get_page(params.get("page"))
    return render_page(request, scope, "knowledge/entity_list.html", {
        "section": "entities", "page": page, "types": Entity.Type.values, "type": kind, "q": q,
        "profiles": _profile_users(scope),
    })


@login_required
def entity_detail(request, pk):
    scope = console_scope(request)
    entity = visible_entities(scope).filter(pk=pk).first()
    if entity is None:  # another tenant's, or named only where this user may not read: the same 404
        raise Http404("No such entity.")
    mentions = list(readable_mentions(scope).filter(entity=entity).select_related("memory__kb", "memory__document")
                    .order_by("-memory__occurred_at", "-memory__created_at")[:MAX_MEMORIES])
    cases, skills = agent_memories(scope, entity, MAX_MEMORIES)
    return render_page(request, scope, "knowledge/entity_detail.html", {
        "section": "entities", "entity": entity, "aliases": sorted({a.surface for a in entity.aliases.all()}),
        "mentions": mentions, "max_memories": MAX_MEMORIES, "cases": cases, "skills": skills,
    })


@login_required
def profile_detail(request, user_id):
    scope = console_scope(request)
    qs = Memory.objects.filter(tenant=scope.tenant, kb_id__in=scope.kb_ids, kind=Memory.Kind.PROFILE,
                               user_id=user_id)
    show_all = request.GET.get("status") == "all"
    if not show_all:
        qs = qs.filter(status=Memory.Status.ACTIVE)
    items = [profile_item(m) for m in qs.order_by("-occurred_at", "id")[:MAX_PROFILE_ITEMS]]
    if not items:
        raise Http404(f"No profile for user '{user_id}'.")
    by_subject: dict[str, list] = {}
    for item in sorted(items, key=lambda i: (i["subject"], i["category"])):
        item["since_at"] = _when(item["since"])  # the API's ISO text, as a date the template formats
        by_subject.setdefault(item["subject"] or "—", []).append(item)
    return render_page(request, scope, "knowledge/profile_detail.html", {
        "section": "entities", "user_id": user_id, "subjects": by_subject, "show_all": show_all,
    })


def _when(value):
    if not isinstance(value, str) or not value:
        return None
    return parse_datetime(value)  # a bare date stays as it is written


def _profile_users(scope) -> list[str]:
    return list(Memory.objects.filter(tenant=scope.tenant, kb_id__in=scope.kb_ids, kind=Memory.Kind.PROFILE,
                                      status=Memory.Status.ACTIVE).order_by("user_id")
                .values_list("user_id", flat=True).distinct()[:200])


