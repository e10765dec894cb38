"""Console pages for knowledge bases: the switcher, the list, create, edit and delete."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from console.shell import KB_KEY, TENANT_KEY, console_scope, render_page, safe_next
from memory.actions import delete_knowledge_base
from memory.models import Chunk, Document, Memory, Message
from tenants.access import Scope, permitted_scope, tenants_for
from tenants.models import KnowledgeBase


@login_required
@require_POST
def switch(request):
    """Remember the tenant and/or knowledge base chosen in the header."""
    if "tenant" in request.POST:
        scope = permitted_scope(request.user, tenant_slug=request.POST["tenant"])  # 404 for a foreign tenant
        if request.session.get(TENANT_KEY) != scope.tenant.slug:
            request.session[TENANT_KEY] = scope.tenant.slug
            request.session.pop(KB_KEY, None)
            # Pages of the old tenant (a document, a KB) would 404 now, so go to the start page.
            return redirect("console:kb-list")
    if "kb" in request.POST:
        scope = console_scope(request)
        slug = request.POST["kb"]
        if slug and not scope.knowledge_bases().filter(slug=slug).exists():
            raise Http404("No such knowledge base.")
        request.session[KB_KEY] = slug
    return redirect(safe_next(request, reverse("console:kb-list")))


def _count_of(model, field: str, **extra):
    """A correlated COUNT subquery; joining three reverse relations at once would multiply rows."""
    rows = model.objects.filter(**{field: OuterRef("pk")}, **extra).order_by().values(field)
    return Coalesce(Subquery(rows.annotate(n=Count("pk")).values("n"), output_field=IntegerField()), Value(0))


@login_required
def kb_list(request):
    if not tenants_for(request.user):
        return render(request, "tenants/no_tenant.html", status=200)
    scope = console_scope(request)
    kbs = scope.knowledge_bases().annotate(
        document_count=_count_of(Document, "kb"),
        failed_count=_count_of(Document, "kb", status=Document.Status.FAILED),
        memory_count=_count_of(Memory, "kb", status=Memory.Status.ACTIVE),
    ).order_by("name")
    return render_page(request, scope, "tenants/kb_list.html", {"kbs": kbs, "section": "kbs"})


class KnowledgeBaseForm(forms.ModelForm):
    class Meta:
        model = KnowledgeBase
        fields = ["name", "slug", "description", "language"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}
        help_texts = {"slug": "Used in URLs and the API (letters, digits, - and _).",
                      "language": "auto, en, zh, … — the default language of its documents."}

    def __init__(self, *args, tenant, **kwargs):
        super().__init__(*args, **kwargs)
        self.tenant = tenant

    def clean_slug(self):
        slug = self.cleaned_data["slug"]
        clash = KnowledgeBase.objects.filter(tenant=self.tenant, slug=slug).exclude(pk=self.instance.pk)
        if clash.exists():
            raise forms.ValidationError(f"A knowledge base '{slug}' already exists in this tenant.")
        return slug


def _require_manager(scope: Scope) -> None:
    # Creating or deleting a KB changes what the whole tenant holds; the API asks the same.
    if not scope.can_manage:
        raise PermissionDenied(f"Only owners and admins of {scope.tenant.slug} can create or delete knowledge bases.")


@login_required
def kb_create(request):
    scope = console_scope(request, write=True)
    _require_manager(scope)
    form = KnowledgeBaseForm(request.POST or None, tenant=scope.tenant, instance=KnowledgeBase(tenant=scope.tenant))
    if request.method == "POST" and form.is_valid():
        kb = form.save()
        messages.success(request, f"Created knowledge base “{kb.name}”.")
        return redirect("console:kb-list")
    return render_page(request, scope, "tenants/kb_form.html", {"form": form, "section": "kbs"},
                       status=400 if form.errors else 200)


@login_required
def kb_edit(request, slug):
    scope = console_scope(request, write=True)
    kb = get_object_or_404(scope.knowledge_bases(), slug=slug)
    form = KnowledgeBaseForm(request.POST or None, tenant=scope.tenant, instance=kb)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Saved “{kb.name}”.")
        return redirect("console:kb-list")
    return render_page(request, scope, "tenants/kb_form.html", {"form": form, "kb": kb, "section": "kbs"},
                       status=400 if form.errors else 200)


@login_required
def kb_delete(request, slug):
    scope = console_scope(request, write=True)
    _require_manager(scope)
    kb = get_object_or_404(scope.knowledge_bases(), slug=slug)
    summary = {
        "documents": kb.documents.count(),
        "chunks": Chunk.objects.filter(document__kb=kb).count(),
        "memories": kb.memories.count(),
        "messages": Message.objects.filter(kb=kb).count(),
    }
    error = ""
    if request.method == "POST":
        # Typing the slug is the confirmation: a stray click or a replayed form cannot delete a KB.
        if request.POST.get("confirm_slug", "").strip() == kb.slug:
            name = kb.name
            delete_knowledge_base(scope, kb)
            if request.session.get(KB_KEY) == slug:
                request.session.pop(KB_KEY)
            messages.success(request, f"Deleted knowledge base “{name}” and everything in it.")
            return redirect("console:kb-list")
        error = f"Type “{kb.slug}” to confirm."
    return render_page(request, scope, "tenants/kb_delete.html",
                       {"kb": kb, "summary": summary, "error": error, "section": "kbs"},
                       status=400 if error else 200)
