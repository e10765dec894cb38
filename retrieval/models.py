from django.db import models


class RemovedKnowledgeBase(models.Model):
    """A knowledge base deleted from the database, kept so its index rows can still be found.

    Index filters always name their knowledge bases, so once a KB (or its whole tenant) is gone
    nothing else says where its rows were. Written in the transaction that deletes the KB; the
    removal that runs after the commit, `reconcile` and `reconcile --repair` read it. Ids are never
    reused (Postgres sequences, SQLite AUTOINCREMENT), so a row here can never hide a live KB.
    """

    tenant_id = models.BigIntegerField(db_index=True, help_text="no foreign key: the tenant may be gone too")
    kb_id = models.BigIntegerField(unique=True)
    slug = models.CharField(max_length=64, blank=True)
    removed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-removed_at"]

    def __str__(self):
        return f"kb {self.kb_id} of tenant {self.tenant_id} ({self.slug})"
