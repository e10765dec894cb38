"""The console's memory browser: episodes and facts of the scope, filtered; a memory's history and its edit form."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect

from console.shell import console_scope, kb_filter, render_page
from conversations.actions import ConversationError
from conversations.memory_edits import EDITABLE_STATUSES, history_entry, memory_history, patch_memory
from memory.models import Memory

MEMORIES_PER_PAGE = 30
# The tabs: what was understood, and what agents did (cases) and learnt (skills).


@login_required
def memory_list(request):
    scope = console_scope(request)
    params = request.GET
    kind = params.get("kind") if params.get("kind") in Memory.Kind.values else Memory.Kind.EPISODE
    qs = Memory.objects.in_scope(scope).filter(kind=kind).select_related("kb", "document", "parent")
    kb_slug = kb_filter(request, scope)
    if kb_slug:
        qs = qs.filter(kb__slug=kb_slug)
    status = params.get("status", Memory.Status.ACTIVE)
    if status in Memory.Status.values:
        qs = qs.filter(status=status)
    # A conversation's user and session, exactly (ids, not words): GET /api/v1/memories filters the same way.
    who = {key: params.get(key, "").strip() for key in ("user_id", "session_id")}
    qs = qs.filter(**{key: value for key, value in who.items() if value})
    if params.get("q"):
        qs = qs.filter(Q(text__icontains=params["q"].strip()) | Q(topic__icontains=params["q"].strip()))
    if params.get("agent_id"):
        qs = qs.filter(agent_id=params["agent_id"].strip())
    if kind == Memory.Kind.EPISODE:
        qs = qs.annotate(fact_total=Count("facts", filter=Q(facts__kind=Memory.Kind.ATOMIC_FACT)))
    page = Paginator(qs.order_by("-created_at", "ordinal"), MEMORIES_PER_PAGE).get_page(params.get("page"))
    return render_page(request, scope, "memories/memory_list.html", {
        "section": "memories", "page": page, "kind": kind, "status": status, "statuses": Memory.Status.values,
        "kbs": scope.knowledge_bases().order_by("name"), "kb_slug": kb_slug or "",
        "user_id": who["user_id"], "session_id": who["session_id"],
        "filtered": bool(params.get("q") or kb_slug or params.get("agent_id") or status != Memory.Status.ACTIVE
                         or any(who.values())),
        "can_curate": request.user.is_staff and request.user.has_perm("memory.change_memory"),
    })


def _scoped_memory(scope, pk) -> Memory:
    return get_object_or_404(Memory.objects.in_scope(scope).select_related("kb", "document"), pk=pk)


@login_required
def memory_history_page(request, pk):
    """Every ADD / UPDATE / DELETE of one memory: the rows `GET /api/v1/memories/{id}/history` answers."""
    scope = console_scope(request)
    rows = memory_history(scope, pk)
    memory = Memory.objects.in_scope(scope).select_related("kb", "document").filter(pk=pk).first()
    if not rows and memory is None:
        raise Http404("No such memory.")
    return render_page(request, scope, "memories/memory_history.html", {
        "section": "memories", "memory": memory, "memory_id": pk,
        "entries": [history_entry(row) for row in reversed(rows)],  # newest first, as a reader scans it
    })


@login_required
def memory_edit(request, pk):
    """Correct a memory's text or status through the same action as `PATCH /api/v1/memories/{id}`.

    A role that may not write gets the 403 page (PermissionDenied), even for the form itself.
    """
    scope = console_scope(request, write=True)
    memory = _scoped_memory(scope, pk)
    form = MemoryEditForm(request.POST or None, initial={"text": memory.text, "status": memory.status})
    if request.method == "POST" and form.is_valid():
        try:
            patch_memory(scope, memory, text=form.cleaned_data["text"], status=form.cleaned_data["status"],
                         via="the console")
        except ConversationError as exc:
            form.add_error("text", str(exc))
        else:
            messages.success(request, "Saved; the memory is re-indexed and the change is in its history.")
            return redirect("console:memory-history", pk=memory.pk)
    return render_page(request, scope, "memories/memory_edit.html", {
        "section": "memories", "memory": memory, "form": form,
        "superseded": memory.status == Memory.Status.SUPERSEDED,
    }, status=400 if form.errors else 200)


class MemoryEditForm(forms.Form):
    # The length and emptiness rules are patch_memory's, reported as the field's error.
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), strip=True, required=False)
    status = forms.ChoiceField(choices=[(s, s) for s in EDITABLE_STATUSES], required=False,
                               help_text="a disabled memory leaves the indexes; setting it active brings it back")

    def clean_status(self):
        return self.cleaned_data["status"] or None
