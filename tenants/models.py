import hashlib
import secrets

from django.conf import settings
from django.core.validators import validate_slug
from django.db import models
from django.utils import timezone


class Tenant(models.Model):
    """An organisation: the hard isolation boundary."""

    class Isolation(models.TextChoices):
        SHARED = "shared", "shared index, filtered by tenant"
        EXCLUSIVE = "exclusive", "the tenant's own collections"

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    isolation = models.CharField(max_length=16, choices=Isolation.choices, default=Isolation.SHARED)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return self.slug


class KnowledgeBase(models.Model):
    """A named collection of sources inside a tenant; the unit of permission."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="knowledge_bases")
    slug = models.SlugField(max_length=64, validators=[validate_slug])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    language = models.CharField(max_length=16, default="auto", help_text="default language: auto, en, zh, …")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant", "slug"]
        constraints = [models.UniqueConstraint(fields=["tenant", "slug"], name="kb_unique_slug_per_tenant")]

    def __str__(self):
        return f"{self.tenant.slug}/{self.slug}"


class Role(models.TextChoices):
    OWNER = "owner"
    ADMIN = "admin"
    EDITOR = "editor"
    VIEWER = "viewer"


WRITER_ROLES = {Role.OWNER, Role.ADMIN, Role.EDITOR}
MANAGER_ROLES = {Role.OWNER, Role.ADMIN}


class Membership(models.Model):
    """A user's role in a tenant; with kb_grants set, only those KBs are visible."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    kb_grants = models.ManyToManyField(KnowledgeBase, blank=True, help_text="empty: every KB of the tenant")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="membership_unique")]

    def __str__(self):
        return f"{self.user} @ {self.tenant} ({self.role})"


def _hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKeyQuerySet(models.QuerySet):
    def active(self):
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    """A tenant's API credential. Only the SHA-256 of the secret is stored; it is shown once."""

    PREFIX = "loci_"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    key_id = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    can_read = models.BooleanField(default=True)
    can_write = models.BooleanField(default=False)
    knowledge_bases = models.ManyToManyField(KnowledgeBase, blank=True, help_text="empty: every KB of the tenant")
    created_at = models.DateTimeField(auto_now_add=True)
    # Who issued it (a scope's actor, e.g. "user:alice"); empty for keys from `manage.py bootstrap`.
    created_by = models.CharField(max_length=150, blank=True, default="")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    def __str__(self):
        return f"{self.tenant.slug}:{self.name} ({self.key_id})"

    @classmethod
    def issue(cls, tenant, name, *, can_write=False, knowledge_bases=()):
        """Create a key and return (key, plaintext); the plaintext is not stored anywhere."""
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        key = cls.objects.create(
            tenant=tenant, name=name, key_id=key_id, secret_hash=_hash_secret(secret), can_write=can_write
        )
        if knowledge_bases:
            key.knowledge_bases.set(knowledge_bases)
        return key, f"{cls.PREFIX}{key_id}_{secret}"

    @classmethod
    def verify(cls, plaintext: str, *, touch: bool = False):
        """The active key matching `plaintext`, or None; `touch`: its use recorded (`touch`)."""
        if not plaintext.startswith(cls.PREFIX):
            return None
        key_id, _, secret = plaintext[len(cls.PREFIX):].partition("_")
        key = cls.objects.active().select_related("tenant").filter(key_id=key_id).first()
        if key is None or not secrets.compare_digest(key.secret_hash, _hash_secret(secret)):
            return None
        if touch:
            key.touch()
        return key

    @property
    def is_active(self):
        return self.revoked_at is None

    def revoke(self):
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])

    def touch(self):
        # Written at most once a minute so busy keys don't turn every read into a write.
        now = timezone.now()
        if self.last_used_at is None or (now - self.last_used_at).total_seconds() > 60:
            ApiKey.objects.filter(pk=self.pk).update(last_used_at=now)
            self.last_used_at = now


class LlmUsage(models.Model):
    """A tenant's chat-model tokens of one day (UTC) and one step: what LLM_TOKEN_BUDGET is checked
    against, and what an operator bills or watches (written by tenants/llm_usage.py)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="llm_usage")
    day = models.DateField()
    step = models.CharField(max_length=40)  # boundaries, extraction, supersede, profiles, sufficiency…
    calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "day", "step"], name="llm_usage_once_per_step")]

    def __str__(self):
        return f"{self.tenant_id} {self.day} {self.step}: {self.prompt_tokens}+{self.completion_tokens}"
