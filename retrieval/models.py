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


class TokenVectors(models.Model):
    """Late-interaction token vectors of one source (retrieval/backends/token_vectors.py): a projection.

    A source is what memories are drawn from: a chat message or a document's child chunk; a memory
    that cites neither (made through the API) has its own. Facts and episodes are scored by their
    sources' vectors, so a message is encoded once however many memories cite it.
    int8 rows of `dim` components, `tokens` of them, made by `model` from the text whose sha256 starts
    with `text_sha`. Written with the indexes' rows, rebuilt by `reindex`, checked by `reconcile`; the
    foreign keys cascade, so deleting a message, memory, chunk, document, KB or tenant removes them with it.
    """

    memory = models.ForeignKey("memory.Memory", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    chunk = models.ForeignKey("memory.Chunk", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey("memory.Message", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=96)
    text_sha = models.CharField(max_length=16)
    tokens = models.PositiveIntegerField()
    data = models.BinaryField()
    # The centroid index (retrieval/backends/token_codes.py): each token's nearest centroid (uint8) of
    # `codebook`; null until coded. Codes of another codebook than its KB's current one are stale.
    codebook = models.ForeignKey("retrieval.TokenCodebook", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    codes = models.BinaryField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "model"], condition=models.Q(memory__isnull=False),
                                    name="token_vectors_one_per_memory_and_model"),
            models.UniqueConstraint(fields=["chunk", "model"], condition=models.Q(chunk__isnull=False),
                                    name="token_vectors_one_per_chunk_and_model"),
            models.UniqueConstraint(fields=["message", "model"], condition=models.Q(message__isnull=False),
                                    name="token_vectors_one_per_message_and_model"),
            models.CheckConstraint(
                condition=(models.Q(memory__isnull=False, chunk__isnull=True, message__isnull=True)
                           | models.Q(memory__isnull=True, chunk__isnull=False, message__isnull=True)
                           | models.Q(memory__isnull=True, chunk__isnull=True, message__isnull=False)),
                name="token_vectors_of_one_source"),
        ]


class TokenCodebook(models.Model):
    """The centroids of a knowledge base's message token vectors (retrieval/backends/token_codes.py).

    One per KB and ColBERT model (`model` is TokenVectors.model's identity, so a model change never mixes
    codebooks); `name` joins the model and the fit's parameters. `generation` is bumped by every write
    and delete of the KB's coded rows, the marker a process's cached partition is checked against.
    """

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    kb = models.ForeignKey("tenants.KnowledgeBase", on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=96)
    name = models.CharField(max_length=160)
    k = models.PositiveIntegerField()
    fitted_tokens = models.PositiveIntegerField(help_text="the KB's token count when it was fitted")
    coded_tokens = models.PositiveBigIntegerField(default=0, help_text="tokens fitted on plus those coded since")
    centroids = models.BinaryField(help_text="k x dim float32")
    generation = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kb", "model"], name="token_codebook_one_per_kb_and_model")]
