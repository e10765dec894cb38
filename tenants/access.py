"""Who may read or write what: every view and every search resolves its scope here first."""

from dataclasses import dataclass, field

from django.core.exceptions import PermissionDenied
from django.http import Http404

from tenants.models import MANAGER_ROLES, WRITER_ROLES, ApiKey, KnowledgeBase, Membership, Role, Tenant


@dataclass(frozen=True)
class Scope:
    """A resolved permission: one tenant and the knowledge bases the caller may use."""

    tenant: Tenant
    kb_ids: frozenset[int]
    can_write: bool
    can_manage: bool
    actor: str
    # (id, slug) of each KB in kb_ids, read with them (a search names them back); None: not read.
    kb_slugs: tuple[tuple[int, str], ...] | None = field(default=None, compare=False)

    def slugs(self, kb_ids) -> list[str]:
        """The slugs of these KBs of the scope (a query only where the scope was made without them)."""
        if self.kb_slugs is None:
            return list(KnowledgeBase.objects.filter(id__in=kb_ids).values_list("slug", flat=True))
        wanted = set(kb_ids)
        return [slug for kb_id, slug in self.kb_slugs if kb_id in wanted]

    def require_kb(self, kb_id: int) -> None:
        if kb_id not in self.kb_ids:
            raise Http404("No such knowledge base.")

    def knowledge_bases(self):
        return KnowledgeBase.objects.filter(tenant=self.tenant, id__in=self.kb_ids)


def tenants_for(user) -> list[Tenant]:
    """Tenants a signed-in user belongs to (for switchers and listings)."""
    if not user.is_authenticated:
        return []
    return list(Tenant.objects.filter(memberships__user=user).order_by("slug"))


def permitted_scope(principal, *, tenant_slug: str | None = None, write: bool = False) -> Scope:
    """The tenant and the KB ids `principal` (a User or an ApiKey) may read, or write with write=True.

    Raises Http404 for a tenant the caller does not belong to (no existence leak) and
    PermissionDenied when the caller belongs but lacks the right.
    """
    if isinstance(principal, ApiKey):
        return _scope_for_key(principal, tenant_slug, write)
    return _scope_for_user(principal, tenant_slug, write)


def _scope_for_key(key: ApiKey, tenant_slug, write) -> Scope:
    if not key.is_active or (tenant_slug and tenant_slug != key.tenant.slug):
        raise Http404("No such tenant.")
    if write and not key.can_write:
        raise PermissionDenied("This API key is read-only.")
    if not write and not key.can_read:
        raise PermissionDenied("This API key may not read.")
    kbs = dict(KnowledgeBase.objects.filter(tenant=key.tenant).values_list("id", "slug"))
    granted = set(key.knowledge_bases.values_list("id", flat=True))
    ids = set(kbs)
    if granted:
        ids &= granted
    return Scope(key.tenant, frozenset(ids), key.can_write, False, f"key:{key.key_id}",
                 tuple(sorted((i, kbs[i]) for i in ids)))


def _scope_for_user(user, tenant_slug, write) -> Scope:
    if user is None or not user.is_authenticated:
        raise PermissionDenied("Authentication required.")
    memberships = Membership.objects.select_related("tenant").filter(user=user)
    if tenant_slug:
        memberships = memberships.filter(tenant__slug=tenant_slug)
    membership = memberships.order_by("tenant__slug").first()
    if membership is None:
        raise Http404("No such tenant.")
    can_write = membership.role in WRITER_ROLES
    if write and not can_write:
        raise PermissionDenied(f"Your role in {membership.tenant.slug} ({membership.role}) is read-only.")
    kbs = dict(KnowledgeBase.objects.filter(tenant=membership.tenant).values_list("id", "slug"))
    ids = set(kbs)
    granted = set(membership.kb_grants.values_list("id", flat=True))
    # Owners and admins see the whole tenant; grants narrow editors and viewers.
    if granted and membership.role not in (Role.OWNER, Role.ADMIN):
        ids &= granted
    return Scope(
        membership.tenant,
        frozenset(ids),
        can_write,
        membership.role in MANAGER_ROLES,
        f"user:{user.get_username()}",
        tuple(sorted((i, kbs[i]) for i in ids)),
    )
