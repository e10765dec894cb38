"""The bridge from a DRF request to tenants.access.permitted_scope."""

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions

from tenants.access import Scope, permitted_scope
from tenants.models import ApiKey, KnowledgeBase


def request_scope(request, *, write: bool = False) -> Scope:
    """The caller's scope; tenant chosen by ?tenant= or X-Loci-Tenant for users in several tenants."""
    principal = request.auth if isinstance(request.auth, ApiKey) else request.user
    tenant_slug = request.query_params.get("tenant") or request.headers.get("X-Loci-Tenant") or None
    try:
        return permitted_scope(principal, tenant_slug=tenant_slug, write=write)
    except PermissionDenied as exc:
        raise exceptions.PermissionDenied(str(exc) or "Permission denied.")
    except Http404 as exc:
        raise exceptions.NotFound(str(exc) or "Not found.")


def requested_kb(scope: Scope, slug: str) -> KnowledgeBase:
    """The knowledge base a request names (`kb`), if the caller may use it; else a 400, the same for one of
    another tenant as for one that does not exist, on every endpoint (a list is never silently empty)."""
    kb = scope.knowledge_bases().filter(slug=slug).first()
    if kb is None:
        raise exceptions.ValidationError({"kb": f"Unknown knowledge base '{slug}'."})
    return kb


class ScopedMixin:
    """Views resolve their scope once per request: read for safe methods, write otherwise."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.scope = request_scope(request, write=request.method not in ("GET", "HEAD", "OPTIONS"))
