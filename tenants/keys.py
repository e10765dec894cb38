"""Issuing, relabelling and revoking a tenant's API keys: the console page and the REST API both call these.

Only owners and admins (a scope with can_manage) manage keys. A key's role is read-only or
read-write; its knowledge bases narrow it (none: every KB of the tenant, those created later too).
The secret is returned once by `create_key` and only its SHA-256 is stored (tenants.models.ApiKey).
Each action is logged with its actor, and a key's requests are attributed to `key:<key_id>` (the
scope's actor, which memory and document histories record) and to its `last_used_at`.
"""

import logging

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from tenants.access import Scope
from tenants.models import ApiKey

log = logging.getLogger(__name__)

READ_ONLY, READ_WRITE = "read-only", "read-write"
ROLES = (READ_ONLY, READ_WRITE)
MAX_NAME = ApiKey._meta.get_field("name").max_length


class KeyRequestError(ValueError):
    """A request the caller must fix (an unknown role or KB, an empty name); its text says what."""


def role_of(key: ApiKey) -> str:
    return READ_WRITE if key.can_write else READ_ONLY


def require_manager(scope: Scope) -> None:
    if not scope.can_manage:
        raise PermissionDenied(f"Only owners and admins of {scope.tenant.slug} can manage API keys "
                               "(and an API key cannot manage keys).")


def tenant_keys(scope: Scope):
    require_manager(scope)
    return (ApiKey.objects.filter(tenant=scope.tenant).prefetch_related("knowledge_bases")
            .order_by("revoked_at", "-created_at"))


def _name(name) -> str:
    name = (name or "").strip() if isinstance(name, str) else ""
    if not name:
        raise KeyRequestError("Give the key a name (what uses it, e.g. 'support-bot').")
    if len(name) > MAX_NAME:
        raise KeyRequestError(f"A key's name has at most {MAX_NAME} characters.")
    return name


def create_key(scope: Scope, name: str, *, role: str = READ_ONLY, kb_slugs=()) -> tuple[ApiKey, str]:
    """A new key of the scope's tenant and its secret (shown once, never stored)."""
    require_manager(scope)
    name = _name(name)
    if role not in ROLES:
        raise KeyRequestError(f"role must be one of {', '.join(ROLES)}, got {role!r}.")
    slugs = list(dict.fromkeys(kb_slugs or ()))
    kbs = list(scope.knowledge_bases().filter(slug__in=slugs))
    unknown = sorted(set(slugs) - {kb.slug for kb in kbs})
    if unknown:
        raise KeyRequestError(f"Unknown knowledge base{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}.")
    with transaction.atomic():
        key, secret = ApiKey.issue(scope.tenant, name, can_write=role == READ_WRITE, knowledge_bases=kbs)
        key.created_by = scope.actor
        key.save(update_fields=["created_by"])
    log.info("tenant %s: API key %s (%s, %s, kbs=%s) created by %s", scope.tenant.slug, key.key_id, name, role,
             ",".join(sorted(slugs)) or "all", scope.actor)
    return key, secret


def key_of(scope: Scope, key_id: str) -> ApiKey:
    """The tenant's key `key_id`; a key of another tenant is as absent as one that never existed."""
    key = tenant_keys(scope).filter(key_id=str(key_id)).first()
    if key is None:
        raise Http404(f"No API key {key_id} in {scope.tenant.slug}.")
    return key


def relabel_key(scope: Scope, key: ApiKey, name: str) -> ApiKey:
    require_manager(scope)
    old, key.name = key.name, _name(name)
    key.save(update_fields=["name"])
    log.info("tenant %s: API key %s renamed %r -> %r by %s", scope.tenant.slug, key.key_id, old, key.name,
             scope.actor)
    return key


def revoke_key(scope: Scope, key: ApiKey) -> ApiKey:
    """Revoke at once: the next request with it gets 401 (REST) or a tool error (MCP). Idempotent."""
    require_manager(scope)
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        log.info("tenant %s: API key %s (%s) revoked by %s", scope.tenant.slug, key.key_id, key.name, scope.actor)
    return key
