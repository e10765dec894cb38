"""The bridge from a DRF request to tenants.access.permitted_scope."""

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions

from tenants.access import Scope, permitted_scope
from tenants.models import ApiKey


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


class ScopedMixin:
    """Views resolve their scope once per request: read for safe methods, write otherwise."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.scope = request_scope(request, write=request.method not in ("GET", "HEAD", "OPTIONS"))
