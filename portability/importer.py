"""Read an export into this installation: rows created under a target tenant, ids kept or remapped, indexes built.

Importing the same file twice changes nothing the second time: documents are matched by content
(a KB holds one document per content hash), chunks by their fixed key, messages by their client
key, memories by id (a remapped id is derived from the source id and the target tenant, so it is
the same on every run), and history rows come only with memories that were new.
"""

import base64
import json
import uuid
from collections.abc import Iterable

from django.core.files.base import ContentFile
from django.db import transaction

from entities.projection import rebuild_entities
from memory.models import Chunk, Document, Memory, MemoryHistory, Message
from portability.records import FORMAT, TYPES, VERSION
from retrieval.projection import reindex
from tenants.models import KnowledgeBase, Tenant

REMAP_NAMESPACE = uuid.UUID("9a1f3c2e-6b7d-4e0a-9c55-0d3e7f1b2a64")
# The texts held to the REST API's limit for a memory's text: a record past it would be committed and
# then embedded and indexed whole (one of 60,000,000 characters ran the index rebuild out of memory).
TEXT_FIELDS = {"memory": ("text",), "history": ("old_text", "new_text")}


class ImportFailed(ValueError):
    """The file is not a Loci export this version can read, or it contradicts this installation."""


def import_lines(lines: Iterable[str], tenant: Tenant, *, remap_ids: bool = False, into_kb: KnowledgeBase | None = None,
                 build_indexes: bool = True) -> dict:
    """Import an export's lines into `tenant` (into one KB when `into_kb`); returns what was created and skipped."""
    with transaction.atomic():
        importer = _read(lines, _Importer(tenant, remap_ids=remap_ids, into_kb=into_kb))
    return _indexed(importer, build_indexes)


def import_into(lines: Iterable[str], tenant_slug: str, *, kb_slug: str | None = None, remap_ids: bool = False,
                build_indexes: bool = True) -> dict:
    """import_lines into the tenant `tenant_slug` (and the KB `kb_slug`), created if missing in the import's own
    transaction, so that a refused file leaves no empty tenant behind."""
    with transaction.atomic():
        tenant, _ = Tenant.objects.get_or_create(slug=tenant_slug, defaults={"name": tenant_slug})
        into_kb = None
        if kb_slug:
            into_kb, _ = KnowledgeBase.objects.get_or_create(tenant=tenant, slug=kb_slug, defaults={"name": kb_slug})
        importer = _read(lines, _Importer(tenant, remap_ids=remap_ids, into_kb=into_kb))
    return _indexed(importer, build_indexes)


def _read(lines: Iterable[str], importer: "_Importer") -> "_Importer":
    try:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                importer.take(number, _parse(number, line))
        importer.finish()
    except BaseException:
        importer.discard_originals()  # files are not rolled back with the rows that name them
        raise
    return importer


def _indexed(importer: "_Importer", build_indexes: bool) -> dict:
    if build_indexes:
        for kb in importer.touched_kbs():
            reindex(tenant=importer.tenant, kb=kb)
            rebuild_entities(importer.tenant, kb)
    return importer.counts


def _parse(number: int, line: str) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ImportFailed(f"line {number}: not JSON ({exc.msg})") from None
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        raise ImportFailed(f"line {number}: a record must be an object with a 'type'")
    if record.get("type") in TEXT_FIELDS:
        for name in TEXT_FIELDS[record["type"]]:
            text = record.get(name)
            if isinstance(text, str) and len(text) > Memory.MAX_TEXT_CHARS:
                raise ImportFailed(f"line {number}: a {record['type']}'s {name} is {len(text)} characters; "
                                   f"a memory's text is at most {Memory.MAX_TEXT_CHARS} characters")
    return record


class _Importer:
    def __init__(self, tenant, *, remap_ids, into_kb):
        self.tenant, self.remap_ids, self.into_kb = tenant, remap_ids, into_kb
        self.header = None
        self.kbs: dict[int, KnowledgeBase] = {}
        self.documents: dict[int, Document] = {}
        self.new_documents: set[int] = set()
        self.chunks: dict[int, int] = {}
        self.memories: dict[str, uuid.UUID] = {}
        self.new_memories: set[uuid.UUID] = set()
        self.superseded: list[tuple[uuid.UUID, str]] = []
        self.saved_originals: list[Document] = []
        self.counts = {kind: {"created": 0, "skipped": 0} for kind in TYPES if kind != "original"}
        self.counts["originals"] = 0
        self.counts["ignored_columns"] = []

    def take(self, number: int, record: dict) -> None:
        kind = record.pop("type")
        if self.header is None:
            if kind != FORMAT or not isinstance(record.get("version"), int):
                raise ImportFailed("line 1 is not the header of a Loci export (type 'loci-export')")
            if record["version"] > VERSION:
                raise ImportFailed(f"the export is format version {record['version']}; this Loci reads up to {VERSION}")
            self.header = record
            return
        handler = getattr(self, f"_{kind}", None)
        if handler is None:
            raise ImportFailed(f"line {number}: unknown record type '{kind}'")
        try:
            handler(record)
        except KeyError as exc:
            raise ImportFailed(f"line {number}: a {kind} record refers to {exc.args[0]}, which the file did not "
                               "define before it") from None

    def finish(self) -> None:
        if self.header is None:
            raise ImportFailed("the file is empty")
        for memory_id, old_target in self.superseded:
            target = self.memories.get(old_target)
            if target is not None:
                Memory.objects.filter(pk=memory_id).update(superseded_by_id=target)

    def discard_originals(self) -> None:
        for document in self.saved_originals:
            document.original.delete(save=False)

    def touched_kbs(self) -> list[KnowledgeBase]:
        return sorted({kb.pk: kb for kb in self.kbs.values()}.values(), key=lambda kb: kb.pk)

    def _fields(self, model, record: dict, *, drop=()) -> dict:
        names = {f.attname for f in model._meta.concrete_fields}
        unknown = sorted(set(record) - names - set(drop))
        for name in unknown:
            column = f"{model.__name__}.{name}"
            if column not in self.counts["ignored_columns"]:
                self.counts["ignored_columns"].append(column)
        return {k: v for k, v in record.items() if k in names and k not in drop}

    def _knowledge_base(self, record: dict) -> None:
        old_id = record["id"]
        kb = self.into_kb
        if kb is None:
            kb, created = KnowledgeBase.objects.get_or_create(
                tenant=self.tenant, slug=record["slug"],
                defaults={"name": record.get("name") or record["slug"], "description": record.get("description", ""),
                          "language": record.get("language", "")})
            self.counts["knowledge_base"]["created" if created else "skipped"] += 1
        self.kbs[old_id] = kb

    def _document(self, record: dict) -> None:
        old_id, kb = record["id"], self.kbs[record["kb_id"]]
        existing = Document.objects.filter(kb=kb, sha256=record["sha256"]).first()
        if existing is not None:
            self.documents[old_id] = existing
            self.counts["document"]["skipped"] += 1
            return
        fields = self._fields(Document, record, drop={"id", "kb_id"})
        if fields.get("status") in Document.ACTIVE_STATUSES:
            # Exported mid-way: no stage will pick it up here. Failed and retryable, so it can be run again.
            fields.update(status=Document.Status.FAILED, stage="failed", retryable=True,
                          error="It was still being processed when it was exported; run it again.")
        document = _restored(Document.objects.create(kb=kb, **fields), fields)
        self.documents[old_id] = document
        self.new_documents.add(document.pk)
        self.counts["document"]["created"] += 1

    def _original(self, record: dict) -> None:
        document = self.documents[record["document_id"]]
        if document.pk in self.new_documents and not document.original:
            data = base64.b64decode(record["content_base64"], validate=True)
            document.original.save(record.get("filename") or document.filename, ContentFile(data), save=False)
            self.saved_originals.append(document)
            Document.objects.filter(pk=document.pk).update(original=document.original.name)
            self.counts["originals"] += 1

    def _chunk(self, record: dict) -> None:
        document = self.documents[record["document_id"]]
        if document.pk not in self.new_documents:
            found = Chunk.objects.filter(document=document, level=record["level"], ordinal=record["ordinal"]) \
                .values_list("pk", flat=True).first()
            if found is not None:
                self.chunks[record["id"]] = found
                self.counts["chunk"]["skipped"] += 1
                return
        fields = self._fields(Chunk, record, drop={"id", "document_id", "parent_id"})
        parent = self.chunks[record["parent_id"]] if record.get("parent_id") else None
        chunk = Chunk.objects.create(document=document, parent_id=parent, **fields)
        self.chunks[record["id"]] = chunk.pk
        self.counts["chunk"]["created"] += 1

    def _message(self, record: dict) -> None:
        kb = self.kbs[record["kb_id"]]
        fields = self._fields(Message, record, drop={"id", "kb_id"})
        key = {k: fields.pop(k) for k in ("user_id", "session_id", "message_id")}
        message, created = Message.objects.get_or_create(tenant=self.tenant, kb=kb, **key, defaults=fields)
        if created:
            _restored(message, fields)
        self.counts["message"]["created" if created else "skipped"] += 1

    def _memory(self, record: dict) -> None:
        old_id = record["id"]
        new_id = uuid.uuid5(REMAP_NAMESPACE, f"{self.tenant.pk}:{old_id}") if self.remap_ids else uuid.UUID(old_id)
        self.memories[old_id] = new_id
        existing = Memory.objects.filter(pk=new_id).values_list("tenant_id", flat=True).first()
        if existing is not None:
            if existing != self.tenant.pk:
                raise ImportFailed(f"memory {old_id} already exists in another tenant of this installation; "
                                   "import with remapped ids (--remap-ids)")
            self.counts["memory"]["skipped"] += 1
            return
        fields = self._fields(Memory, record, drop={"id", "kb_id", "document_id", "parent_id", "superseded_by_id",
                                                   "source_chunk_ids"})
        document = self.documents[record["document_id"]] if record.get("document_id") else None
        parent = self.memories[record["parent_id"]] if record.get("parent_id") else None
        memory = _restored(Memory.objects.create(id=new_id, tenant=self.tenant, kb=self.kbs[record["kb_id"]],
                                                 document=document, parent_id=parent, **fields), fields)
        chunk_ids = [self.chunks[c] for c in record.get("source_chunk_ids", []) if c in self.chunks]
        if chunk_ids:
            memory.source_chunks.set(chunk_ids)
        if record.get("superseded_by_id"):
            self.superseded.append((new_id, record["superseded_by_id"]))
        self.new_memories.add(new_id)
        self.counts["memory"]["created"] += 1

    def _history(self, record: dict) -> None:
        memory_id = self.memories.get(record["memory_id"])
        if memory_id is None or memory_id not in self.new_memories:
            self.counts["history"]["skipped"] += 1
            return
        fields = self._fields(MemoryHistory, record, drop={"id", "memory_id", "kb_id"})
        kb = self.kbs.get(record.get("kb_id"))
        MemoryHistory.objects.create(memory_id=memory_id, tenant=self.tenant, kb_id=kb.pk if kb else None, **fields)
        self.counts["history"]["created"] += 1


def _restored(obj, fields: dict):
    """Put back the exported times that auto_now(_add) replaced on create."""
    times = {f.attname: fields[f.attname] for f in obj._meta.concrete_fields
             if (getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)) and fields.get(f.attname)}
    if times:
        type(obj).objects.filter(pk=obj.pk).update(**times)
    return obj
