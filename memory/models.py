"""The core's rows: documents, their chunks, chat messages, memories and the memories' history.

The tables keep the `ingest_` names they had when these models lived in `ingest`, so an existing
database needs no change (see memory/migrations/0001_initial.py).
"""

import hashlib
import uuid
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from tenants.models import KnowledgeBase, Tenant


def _original_path(document, filename):
    # Originals are stored by content hash under the tenant, so nothing user-supplied becomes a path.
    suffix = Path(filename).suffix.lower()[:16]
    return f"originals/{document.kb.tenant_id}/{document.kb_id}/{document.sha256}{suffix}"


class DocumentQuerySet(models.QuerySet):
    def in_scope(self, scope):
        return self.filter(kb__tenant=scope.tenant, kb_id__in=scope.kb_ids)


class Document(models.Model):
    """One uploaded source. The original file is kept whatever happens to it."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        PARSING = "parsing"
        EXTRACTING = "extracting"
        INDEXING = "indexing"
        READY = "ready"
        FAILED = "failed"

    ACTIVE_STATUSES = (Status.QUEUED, Status.PARSING, Status.EXTRACTING, Status.INDEXING)

    kb = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="documents")
    original = models.FileField(upload_to=_original_path, max_length=500)
    filename = models.CharField(max_length=500)
    sha256 = models.CharField(max_length=64, db_index=True)
    size = models.BigIntegerField(default=0)
    content_type = models.CharField(max_length=200, blank=True, help_text="as declared by the uploader")
    detected_type = models.CharField(max_length=32, blank=True, help_text="as detected from the content")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    stage = models.CharField(max_length=200, blank=True)
    progress = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    chunk_count = models.PositiveIntegerField(default=0)
    episode_count = models.PositiveIntegerField(default=0)
    fact_count = models.PositiveIntegerField(default=0)
    page_count = models.PositiveIntegerField(null=True, blank=True)
    extraction_mode = models.CharField(max_length=16, blank=True, help_text="llm or deterministic")
    metadata = models.JSONField(default=dict, blank=True)
    # What the uploader attached (tags, category, source, chapter…): kept on every chunk and memory
    # row derived from the document, and filterable in the index engines (retrieval.backends.base).
    user_metadata = models.JSONField(default=dict, blank=True)
    uploaded_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The running stage's claim; empty between stages. updated_at is its lease, renewed by a heartbeat.
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    retryable = models.BooleanField(default=True, help_text="false when the failure is in the file itself")

    objects = DocumentQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["kb", "sha256"], name="document_unique_content_per_kb")]

    def __str__(self):
        return self.filename

    @property
    def tenant_id(self):
        return self.kb.tenant_id

    @property
    def is_finished(self):
        return self.status in (self.Status.READY, self.Status.FAILED)

    @property
    def is_stalled(self) -> bool:
        """Unfinished and not moved for a whole lease: its worker died or its message was lost."""
        stale = timezone.now() - timezone.timedelta(seconds=settings.LOCI_STAGE_LEASE_SECONDS)
        return self.status in self.ACTIVE_STATUSES and self.updated_at is not None and self.updated_at < stale

    @property
    def can_rerun(self) -> bool:
        return self.is_finished or self.is_stalled

    def claim(self, previous: str, status: str, stage: str, lease_seconds: int) -> bool:
        """Move from `previous` to `status` under a new claim token; False if someone else has it.

        `previous` counts only once its stage let go of its claim (finished). A document already in
        `status` is taken over only when its holder stopped renewing the lease for `lease_seconds`:
        that holder died (or froze), and from now on every write of its is refused (`holding_claim`).
        """
        now = timezone.now()
        stale = now - timezone.timedelta(seconds=lease_seconds)
        token = uuid.uuid4()
        updated = Document.objects.filter(
            models.Q(status=previous, claim_token__isnull=True)
            | models.Q(status=status, claim_token__isnull=False, updated_at__lt=stale),
            pk=self.pk,
        ).update(status=status, stage=stage, claim_token=token, updated_at=now)
        if updated:
            self.status, self.stage, self.claim_token = status, stage, token
        return bool(updated)

    def lease_left(self, status: str, lease_seconds: int) -> float | None:
        """Seconds before `claim` may take this document over in `status`; None once it has left `status`."""
        if self.status != status:
            return None
        expires = self.updated_at + timezone.timedelta(seconds=lease_seconds)
        return max(0.0, (expires - timezone.now()).total_seconds())

    def _held(self):
        """The row while this object's claim is still the document's, for a conditional UPDATE."""
        return Document.objects.filter(pk=self.pk, claim_token=self.claim_token)

    def update_own_row(self, **fields) -> int:
        """UPDATE this document's row with `fields`; the number of rows changed (0 or 1).

        While this object holds a claim, only if the claim is still the document's: a stage that
        lost it must not write over the new holder's (0 rows). Without a claim, by pk.
        """
        rows = self._held() if self.claim_token else Document.objects.filter(pk=self.pk)
        return rows.update(**fields)

    def lost_claim(self) -> "ClaimLost":
        """Why a write under this object's claim found no row: the document was deleted
        (DocumentGone), or another claim replaced this one after its lease ran out (ClaimLost)."""
        if not Document.objects.filter(pk=self.pk).exists():
            return DocumentGone(f"document {self.pk} was deleted while its {self.stage} stage ran")
        return ClaimLost(f"document {self.pk}: the {self.stage} stage lost its claim")

    def renew_lease(self) -> bool:
        """Refresh the lease of the claim this object holds; False once another claim replaced it (or it is gone)."""
        return bool(self._held().update(updated_at=timezone.now()))

    @contextmanager
    def holding_claim(self):
        """A transaction in which this object's claim is still the document's, or ClaimLost (DocumentGone).

        The conditional UPDATE comes first: it locks the row (PostgreSQL) or the database (SQLite)
        until commit, so neither a take-over nor a delete can slip in between the check and the
        writes that follow: a delete waits for the commit, and its index removal runs after it.
        """
        with transaction.atomic():
            if not self.renew_lease():
                raise self.lost_claim()
            yield

    def release_claim(self) -> None:
        """End this stage: the next one may claim the document. ClaimLost if another holder took it."""
        if not self._held().update(claim_token=None, updated_at=timezone.now()):
            raise self.lost_claim()
        self.claim_token = None

    def set_progress(self, progress: int, stage: str) -> None:
        self.progress, self.stage = max(0, min(100, progress)), stage[:200]
        if not self.update_own_row(progress=self.progress, stage=self.stage, updated_at=timezone.now()) \
                and self.claim_token:
            raise self.lost_claim()

    def mark_failed(self, reason: str, *, retryable: bool = True) -> bool:
        """Fail the document with a reason; `retryable` False when running it again cannot help.

        False when the document was deleted meanwhile; ClaimLost when another claim holds it.
        """
        self.status, self.error, self.finished_at = self.Status.FAILED, reason[:2000], timezone.now()
        self.stage, self.retryable = "failed", retryable
        return self._finish(status=self.status, error=self.error, stage=self.stage, finished_at=self.finished_at,
                            retryable=retryable)

    def mark_ready(self) -> bool:
        """The last stage is done. False when the document was deleted meanwhile; ClaimLost when
        another claim holds it."""
        self.status, self.progress, self.stage, self.error = self.Status.READY, 100, "ready", ""
        self.finished_at, self.retryable = timezone.now(), True
        return self._finish(status=self.status, progress=100, stage="ready", error="", finished_at=self.finished_at,
                            retryable=True)

    def _finish(self, **fields) -> bool:
        # A filtered UPDATE, never `save(update_fields=…)`: on a document deleted while its stage ran
        # that raises DatabaseError ("did not affect any rows") and crashes a stage that should stop
        # quietly. Under a claim, only while the claim is still the document's.
        rows = self._held() if self.claim_token else Document.objects.filter(pk=self.pk)
        self.updated_at = timezone.now()
        if rows.update(claim_token=None, updated_at=self.updated_at, **fields):
            self.claim_token = None
            return True
        if self.claim_token:
            lost = self.lost_claim()
            if not isinstance(lost, DocumentGone):
                raise lost
        return False  # deleted: nothing left to mark


class ClaimLost(Exception):
    """A stage's claim was taken over (its lease ran out): it must stop without writing anything."""


class DocumentGone(ClaimLost):
    """The document was deleted while its stage ran: the stage stops quietly (the delete removed its rows)."""


class Chunk(models.Model):
    """A retrieval unit cut along the document's structure: parents hold children."""

    class Level(models.TextChoices):
        PARENT = "parent"
        CHILD = "child"

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    parent = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="children")
    level = models.CharField(max_length=8, choices=Level.choices)
    ordinal = models.PositiveIntegerField(help_text="position among the document's chunks of this level")
    text = models.TextField()
    section_path = models.JSONField(default=list, blank=True)
    page = models.PositiveIntegerField(null=True, blank=True)
    slide = models.PositiveIntegerField(null=True, blank=True)
    sheet = models.CharField(max_length=200, blank=True)
    start_time = models.FloatField(null=True, blank=True, help_text="seconds")
    end_time = models.FloatField(null=True, blank=True, help_text="seconds")
    speaker = models.CharField(max_length=200, blank=True)
    token_count = models.PositiveIntegerField(default=0)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["document", "level", "ordinal"]
        constraints = [models.UniqueConstraint(fields=["document", "level", "ordinal"], name="chunk_fixed_key")]

    def __str__(self):
        return f"{self.document_id}:{self.level}:{self.ordinal}"

    @property
    def location(self) -> dict:
        """Where in the original this chunk sits, with empty fields left out."""
        loc = {
            "page": self.page,
            "slide": self.slide,
            "sheet": self.sheet or None,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "speaker": self.speaker or None,
            "section_path": self.section_path or None,
        }
        return {k: v for k, v in loc.items() if v not in (None, [], "")}


class Message(models.Model):
    """A raw chat turn posted through the memories API; accumulated until flushed into a MemCell."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="messages")
    kb = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="messages")
    user_id = models.CharField(max_length=200, db_index=True)
    agent_id = models.CharField(max_length=200, blank=True)
    group_id = models.CharField(max_length=200, blank=True)
    run_id = models.CharField(max_length=200, blank=True)
    user_metadata = models.JSONField(default=dict, blank=True, help_text="the posting batch's metadata")
    session_id = models.CharField(max_length=200, db_index=True)
    message_id = models.CharField(max_length=200, help_text="client id, or generated")
    sender_id = models.CharField(max_length=200, blank=True)
    sender_name = models.CharField(max_length=200, blank=True)
    role = models.CharField(max_length=32, blank=True)
    content = models.TextField()
    timestamp = models.DateTimeField(db_index=True)
    segment_id = models.UUIDField(null=True, blank=True, db_index=True, help_text="MemCell once extracted")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["timestamp", "id"]
        constraints = [
            models.UniqueConstraint(fields=["kb", "user_id", "session_id", "message_id"], name="message_idempotent")
        ]

    def __str__(self):
        return f"{self.session_id}:{self.message_id}"


class MemoryQuerySet(models.QuerySet):
    def in_scope(self, scope):
        return self.filter(tenant=scope.tenant, kb_id__in=scope.kb_ids)

    def active(self):
        return self.filter(status=Memory.Status.ACTIVE)


class Memory(models.Model):
    """What was understood: an episode, its atomic facts, and later kinds. Every memory cites sources."""

    class Kind(models.TextChoices):
        EPISODE = "episode"
        ATOMIC_FACT = "atomic_fact"
        PROFILE = "profile"
        FORESIGHT = "foresight"
        AGENT_CASE = "agent_case"
        AGENT_SKILL = "agent_skill"
        # A node of a summary tree (retrieval/summary_tree): a cluster of episodes summarised, cited to them.
        SUMMARY = "summary"

    class Status(models.TextChoices):
        ACTIVE = "active"
        DISABLED = "disabled"
        SUPERSEDED = "superseded"

    # The most a memory's text may hold where it comes from outside (an edit, an import): one statement
    # or one episode narrative, not a document.
    MAX_TEXT_CHARS = 20_000

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memories")
    kb = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="memories")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, null=True, blank=True, related_name="memories")
    kind = models.CharField(max_length=16, choices=Kind.choices, db_index=True)
    parent = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="facts")
    ordinal = models.PositiveIntegerField(default=0, help_text="fixed key within the document or segment")
    text = models.TextField()
    topic = models.CharField(max_length=300, blank=True)
    source_chunks = models.ManyToManyField(Chunk, blank=True, related_name="memories")
    source_message_ids = models.JSONField(default=list, blank=True, help_text="client message ids cited")
    user_id = models.CharField(max_length=200, blank=True, db_index=True)
    session_id = models.CharField(max_length=200, blank=True, db_index=True)
    # Scopes beside the user (Mem0's agent_id and run_id; a group chat's id): "" is none. A search
    # sees agent-scoped memories only when it names the agent (or asks for every agent).
    agent_id = models.CharField(max_length=200, blank=True, db_index=True)
    group_id = models.CharField(max_length=200, blank=True, db_index=True)
    run_id = models.CharField(max_length=200, blank=True, db_index=True)
    user_metadata = models.JSONField(default=dict, blank=True, help_text="the caller's metadata, filterable")
    segment_id = models.UUIDField(null=True, blank=True, db_index=True)
    occurred_at = models.DateTimeField(null=True, blank=True, help_text="when it happened, if known")
    extraction_mode = models.CharField(max_length=16, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    superseded_by = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "memories"
        indexes = [models.Index(fields=["tenant", "kb", "kind", "status"])]

    def __str__(self):
        return f"{self.kind}: {self.text[:60]}"

    @staticmethod
    def hash_text(text: str) -> str:
        normalised = " ".join(text.lower().split())
        return hashlib.sha256(normalised.encode()).hexdigest()

    def save(self, *args, **kwargs):
        self.content_hash = self.hash_text(self.text)
        if kwargs.get("update_fields") is not None and "text" in kwargs["update_fields"]:
            kwargs["update_fields"] = {*kwargs["update_fields"], "content_hash"}
        super().save(*args, **kwargs)


class MemoryHistory(models.Model):
    """Audit row for every change to a memory."""

    class Event(models.TextChoices):
        ADD = "ADD"
        UPDATE = "UPDATE"
        DELETE = "DELETE"

    memory_id = models.UUIDField(db_index=True, help_text="kept after the memory is deleted")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memory_history")
    # A plain id, kept after the knowledge base is deleted; set by the deletes, where the memory (and
    # so its KB) is gone once the row is written: a KB's webhooks still learn of its deletes.
    kb_id = models.PositiveIntegerField(null=True, blank=True)
    event = models.CharField(max_length=8, choices=Event.choices)
    old_text = models.TextField(blank=True)
    new_text = models.TextField(blank=True)
    old_status = models.CharField(max_length=16, blank=True)
    new_status = models.CharField(max_length=16, blank=True)
    actor = models.CharField(max_length=200, blank=True)
    reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "memory history"

    def __str__(self):
        return f"{self.event} {self.memory_id}"


class CaseCluster(models.Model):
    """One cluster of agent cases in one scope (tenant, KB, user, agent): the seed's clustering manager's
    state, persisted so clustering is incremental. A case joins the cluster whose centroid is nearest
    when it is similar enough, works with the same tools, and the cluster was last fed within the
    time gap; else it starts one.
    A cluster with enough successful cases yields a skill (`skill`, a Memory of kind agent_skill)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="case_clusters")
    kb = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="case_clusters")
    user_id = models.CharField(max_length=200, blank=True)
    agent_id = models.CharField(max_length=200, blank=True)
    centroid = models.JSONField(default=list, help_text="mean embedding of its cases' tasks")
    case_ids = models.JSONField(default=list, help_text="its cases, in the order they joined")
    tools = models.JSONField(default=list, help_text="the tools its cases called")
    last_at = models.DateTimeField(help_text="when its latest case happened")
    skill = models.ForeignKey(Memory, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "kb", "user_id", "agent_id"])]

    def __str__(self):
        return f"cluster {self.pk} of {self.user_id}/{self.agent_id}: {len(self.case_ids)} cases"


from memory.jobs import ExtractionJob  # noqa: E402, F401  (registered with the core's rows; see memory/jobs.py)
