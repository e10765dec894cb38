"""The canonical entity store: one Entity per tenant and name, and the links from memories to it.

An Entity belongs to a tenant, never to a KB: "Caroline" in two knowledge bases of one tenant is one
entity; in two tenants, two. Which KBs a caller may see is decided by the mentions (each carries its
memory's KB), so an entity is visible only through a mention in a permitted KB.
"""

from django.db import models

from memory.models import Memory
from tenants.models import KnowledgeBase, Tenant


class Entity(models.Model):
    """A canonical entity of a tenant; `key` is its normalised name (entities/resolution.py)."""

    class Type(models.TextChoices):
        PERSON = "person"
        ORGANIZATION = "organization"
        PLACE = "place"
        WORK = "work"  # products, books, films, songs, brands
        OTHER = "other"  # a proper name of no known type
        DATE = "date"  # typed value: `value` is the ISO date
        AMOUNT = "amount"  # typed value: `value` is "<number> <unit>"

    NAMED = (Type.PERSON, Type.ORGANIZATION, Type.PLACE, Type.WORK, Type.OTHER)

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="entities")
    type = models.CharField(max_length=16, choices=Type.choices, db_index=True)
    key = models.CharField(max_length=200, help_text="normalised name: what mentions resolve by")
    name = models.CharField(max_length=200, help_text="the most frequent surface form")
    value = models.CharField(max_length=100, blank=True, help_text="dates and amounts: the typed value")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        verbose_name_plural = "entities"
        constraints = [models.UniqueConstraint(fields=["tenant", "type", "key"], name="entity_unique_per_tenant")]

    def __str__(self):
        return f"{self.type}: {self.name}"


class EntityAlias(models.Model):
    """A surface form an entity was written as ("Dr. Smith", "Smith's"), by its normalised key."""

    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="aliases")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200, db_index=True)
    surface = models.CharField(max_length=200)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["entity", "surface"], name="entity_alias_unique")]
        indexes = [models.Index(fields=["tenant", "key"])]


class EntityMention(models.Model):
    """A memory names an entity. Deleted with its memory (and so with every delete path of memories)."""

    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="mentions")
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="entity_mentions")
    # Copies of the memory's permission fields, so the lookup filters where it reads (one index).
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    kb = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="+")
    surface = models.CharField(max_length=200)
    mode = models.CharField(max_length=16, default="deterministic", help_text="deterministic or llm")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["entity", "memory"], name="entity_mention_unique")]
        indexes = [models.Index(fields=["tenant", "entity", "kb"])]
