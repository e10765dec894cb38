"""What every console page shares: the signed-in user's scope, the switcher's choice and the page frame."""

from django.http import Http404
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme

from tenants.access import Scope, permitted_scope, tenants_for
from tenants.models import KnowledgeBase

TENANT_KEY = "console_tenant"
KB_KEY = "console_kb"


def console_scope(request, *, write: bool = False) -> Scope:
    """The signed-in user's scope in the tenant chosen in the session (their first tenant by default)."""
    slug = request.session.get(TENANT_KEY)
    try:
        return permitted_scope(request.user, tenant_slug=slug, write=write)
    except Http404:
        if not slug:
            raise
        # The membership behind the remembered tenant is gone: fall back rather than lock the user out.
        request.session.pop(TENANT_KEY, None)
        request.session.pop(KB_KEY, None)
        return permitted_scope(request.user, write=write)


def current_kb(request, scope: Scope) -> KnowledgeBase | None:
    """The knowledge base chosen in the switcher, if it is still in scope."""
    slug = request.session.get(KB_KEY)
    return scope.knowledge_bases().filter(slug=slug).first() if slug else None


def kb_filter(request, scope: Scope) -> str:
    """?kb=<slug>, or the switcher's knowledge base when the parameter is absent (?kb= means all)."""
    if "kb" in request.GET:
        return request.GET["kb"]
    kb = current_kb(request, scope)
    return kb.slug if kb else ""


def render_page(request, scope: Scope, template: str, context: dict | None = None, *, status: int = 200):
    """Render a console page with the header's switcher data."""
    base = {
        "scope": scope,
        "tenants": tenants_for(request.user),
        "switcher_kbs": list(scope.knowledge_bases().order_by("name")),
        "current_kb": current_kb(request, scope),
    }
    return render(request, template, {**base, **(context or {})}, status=status)


def safe_next(request, fallback: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        return target
    return fallback


def location_label(loc: dict) -> str:
    """'p. 3 · slide 2 · sheet “Q1” · 01:02–01:30' from a chunk's or a source's location fields."""
    parts = []
    if loc.get("page") is not None:
        parts.append(f"p. {loc['page']}")
    if loc.get("slide") is not None:
        parts.append(f"slide {loc['slide']}")
    if loc.get("sheet"):
        parts.append(f"sheet “{loc['sheet']}”")
    if loc.get("start_time") is not None:
        span = _clock(loc["start_time"])
        if loc.get("end_time") is not None:
            span += f"–{_clock(loc['end_time'])}"
        parts.append(span)
    if loc.get("speaker"):
        parts.append(loc["speaker"])
    return " · ".join(parts)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60:02d}:{rest % 60:02d}"
