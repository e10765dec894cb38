"""The console's memory browser: episodes and facts of the scope, filtered, with a link to curate them."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q

from console.shell import console_scope, kb_filter, render_page
from memory.models import Memory

MEMORIES_PER_PAGE = 30


@login_required
def memory_list(request):
    scope = console_scope(request)
    params = request.GET
    kind = params.get("kind") if params.get("kind") in (Memory.Kind.EPISODE, Memory.Kind.ATOMIC_FACT) \
        else Memory.Kind.EPISODE
    qs = Memory.objects.in_scope(scope).filter(kind=kind).select_related("kb", "document", "parent")
    kb_slug = kb_filter(request, scope)
    if kb_slug:
        qs = qs.filter(kb__slug=kb_slug)
    status = params.get("status", Memory.Status.ACTIVE)
    if status in Memory.Status.values:
        qs = qs.filter(status=status)
    if params.get("q"):
        qs = qs.filter(Q(text__icontains=params["q"].strip()) | Q(topic__icontains=params["q"].strip()))
    if kind == Memory.Kind.EPISODE:
        qs = qs.annotate(fact_total=Count("facts"))
    page = Paginator(qs.order_by("-created_at", "ordinal"), MEMORIES_PER_PAGE).get_page(params.get("page"))
    return render_page(request, scope, "ingest/memory_list.html", {
        "section": "memories", "page": page, "kind": kind, "status": status, "statuses": Memory.Status.values,
        "kbs": scope.knowledge_bases().order_by("name"), "kb_slug": kb_slug or "",
        "filtered": bool(params.get("q") or kb_slug or status != Memory.Status.ACTIVE),
        "can_curate": request.user.is_staff and request.user.has_perm("memory.change_memory"),
    })
