"""The document pipeline's domain steps: parse+chunk, extract, index. Tasks call these by id."""

import logging

from django.conf import settings
from django.utils import timezone

from common.llm_scope import llm_scope
from entities.actions import link_memories
from ingest.chunking import chunk_document
from ingest.document_history import previous_memories, record_extraction
from extraction import extractor
from extraction.base import ExtractionUnit, Passage, llm_entities
from ingest.originals import local_original
from ingest.parsing.base import ParseError
from ingest.parsing.detect import detect_type
from ingest.parsing.dispatch import parse_file
from ingest.upload_limits import limit_megabytes, megabytes
from memory.ids import memory_uuid
from memory.models import Chunk, Document, Memory
from retrieval import summary_tree
from retrieval.projection import index_document_rows

log = logging.getLogger(__name__)

Status = Document.Status
# Progress bands per stage, so the bar only moves forward across stages.
PARSE_BAND, EXTRACT_BAND, INDEX_BAND = (2, 35), (35, 75), (75, 99)
def _band(band, fraction):
    low, high = band
    return int(low + (high - low) * max(0.0, min(1.0, fraction)))


def parse_and_chunk(document: Document) -> int:
    """Parse the original and replace the document's chunks. Returns the number of chunks."""
    document.set_progress(PARSE_BAND[0], "parsing")
    if document.size > settings.LOCI_MAX_UPLOAD_BYTES:
        raise ParseError(
            f"The file is {megabytes(document.size)}; the limit is {limit_megabytes(settings.LOCI_MAX_UPLOAD_BYTES)}."
        )
    with local_original(document.original) as path:  # a temporary copy when the storage is an object store
        detected = _record_detected_type(document, path)
        parsed = parse_file(path, document.filename, max_bytes=settings.LOCI_MAX_UPLOAD_BYTES, detected=detected)
    document.set_progress(_band(PARSE_BAND, 0.7), "chunking")
    parents = chunk_document(parsed)
    if not parents:
        raise ParseError("No text was found in the file.")
    with document.holding_claim():  # a run that lost its claim must not replace the new holder's chunks
        document.chunks.all().delete()  # idempotent: a re-run replaces, never appends
        parent_rows = Chunk.objects.bulk_create(
            Chunk(
                document=document,
                level=Chunk.Level.PARENT,
                ordinal=i,
                text=p.text,
                section_path=p.section_path,
                page=p.page,
                slide=p.slide,
                sheet=p.sheet[:200],
                start_time=p.start_time,
                end_time=p.end_time,
                token_count=p.tokens,
                metadata={"title": p.title, **p.metadata},
            )
            for i, p in enumerate(parents)
        )
        children, ordinal = [], 0
        for parent_row, spec in zip(parent_rows, parents):
            for c in spec.children:
                children.append(
                    Chunk(
                        document=document,
                        parent=parent_row,
                        level=Chunk.Level.CHILD,
                        ordinal=ordinal,
                        text=c.text,
                        section_path=spec.section_path,
                        page=c.page if c.page is not None else spec.page,
                        slide=spec.slide,
                        sheet=spec.sheet[:200],
                        start_time=c.start_time,
                        end_time=c.end_time,
                        speaker=c.speaker[:200],
                        token_count=c.tokens,
                        # a window of several cues keeps where each begins, for the citations of its facts
                        metadata={"kind": c.kind, **({"cues": c.cues} if len(c.cues) > 1 else {})},
                    )
                )
                ordinal += 1
        Chunk.objects.bulk_create(children, batch_size=500)
        document.detected_type = parsed.detected_type[:32]
        document.page_count = parsed.page_count
        document.chunk_count = len(children)
        document.metadata = {**document.metadata, **_json_safe(parsed.metadata)}
        document.save(update_fields=["detected_type", "page_count", "chunk_count", "metadata", "updated_at"])
    return len(children)


def extract_memories(document: Document) -> tuple[int, int]:
    """Replace the document's episodes and facts, one episode per parent chunk."""
    document.set_progress(EXTRACT_BAND[0], "extracting")
    engine = extractor()
    parents = list(document.chunks.filter(level=Chunk.Level.PARENT).order_by("ordinal"))
    children_by_parent: dict[int, list[Chunk]] = {}
    for child in document.chunks.filter(level=Chunk.Level.CHILD).order_by("ordinal"):
        children_by_parent.setdefault(child.parent_id, []).append(child)
    language = document.kb.language
    results, modes = [], set()
    for i, parent in enumerate(parents):
        children = children_by_parent.get(parent.pk, [])
        unit = ExtractionUnit(
            topic_hint=" › ".join(parent.section_path) or parent.metadata.get("title", "") or document.filename,
            passages=[Passage(str(c.pk), c.text, c.speaker) for c in children],
            language=language,
            context={"document": document.filename, "section_path": parent.section_path},
        )
        with llm_scope(tenant_id=document.kb.tenant_id):  # the model's tokens count to the document's tenant
            episode = engine.extract(unit)
        modes.add(section_mode(episode, engine))
        results.append((parent, children, episode))
        if i % 10 == 0:
            document.set_progress(_band(EXTRACT_BAND, (i + 1) / max(1, len(parents))), f"extracting {i + 1}/{len(parents)}")
    kb = document.kb
    mode = "llm" if modes == {"llm"} else ("mixed" if "llm" in modes else "deterministic")
    facts_total = 0
    with document.holding_claim():
        before = previous_memories(document)
        written: list[Memory] = []
        document.memories.all().delete()
        chunk_by_id = {str(c.pk): c for _, children, _ in results for c in children}
        for ordinal, (parent, children, extracted) in enumerate(results):
            episode = Memory.objects.create(
                id=memory_uuid("doc", document.pk, "episode", ordinal),
                tenant_id=kb.tenant_id,
                kb=kb,
                document=document,
                kind=Memory.Kind.EPISODE,
                ordinal=ordinal,
                text=extracted.summary or parent.text[:500],
                topic=(extracted.topic or parent.metadata.get("title", ""))[:300],
                occurred_at=extracted.occurred_at,
                extraction_mode=section_mode(extracted, engine),
                metadata={"parent_chunk_id": parent.pk, **_warning(extracted)},
                user_metadata=document.user_metadata or {},
            )
            episode.source_chunks.set([parent, *children])
            facts = []
            for j, fact in enumerate(extracted.facts):
                facts.append(
                    Memory(
                        id=memory_uuid("doc", document.pk, "fact", ordinal, j),
                        tenant_id=kb.tenant_id,
                        kb=kb,
                        document=document,
                        kind=Memory.Kind.ATOMIC_FACT,
                        parent=episode,
                        ordinal=j,
                        text=fact.text,
                        topic=episode.topic,
                        occurred_at=fact.occurred_at,
                        extraction_mode=episode.extraction_mode,
                        content_hash=Memory.hash_text(fact.text),
                        metadata={"parent_chunk_id": parent.pk, **llm_entities(fact)},
                        user_metadata=document.user_metadata or {},
                    )
                )
            Memory.objects.bulk_create(facts)
            written += [episode, *facts]
            through = Memory.source_chunks.through
            through.objects.bulk_create(
                [
                    through(memory_id=f.id, chunk_id=chunk_by_id[sid].pk)
                    for f, extracted_fact in zip(facts, extracted.facts)
                    for sid in dict.fromkeys(extracted_fact.source_ids)
                    if sid in chunk_by_id
                ]
            )
            facts_total += len(facts)
            link_memories([episode, *facts])
        record_extraction(document, before, written)
        document.episode_count = len(results)
        document.fact_count = facts_total
        document.extraction_mode = mode
        document.save(update_fields=["episode_count", "fact_count", "extraction_mode", "updated_at"])
    return len(results), facts_total


def index_document(document: Document) -> int:
    """Project the document's chunks and memories into the vector and keyword indexes."""
    document.set_progress(INDEX_BAND[0], "indexing")
    summary_tree.build_for_document(document, guard=document.holding_claim)  # its nodes are among the rows below
    return index_document_rows(document, progress=lambda f: document.set_progress(_band(INDEX_BAND, f), "indexing"),
                               guard=document.holding_claim)


def section_mode(extracted, engine) -> str:
    """Who wrote one section's memories: the model, or the rules where its call failed. Each section's
    own, so a search result says which (the document's is "mixed" when some sections fell back)."""
    return getattr(extracted, "mode", engine.mode)


def _warning(extracted) -> dict:
    """The reason an LLM extraction fell back to the deterministic one, kept beside the episode."""
    warning = getattr(extracted, "warning", "")
    return {"extraction_warning": str(warning)[:500]} if warning else {}


def _json_safe(value):
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _record_detected_type(document: Document, path) -> str | None:
    """Keep the detected type even when parsing then fails (a password-protected PDF is still a PDF);
    the type, which the parse then uses, or None."""
    try:
        detected = detect_type(path, document.filename)
    except ParseError:
        return None  # empty or unreadable: parse_file raises the same error with its reason
    document.detected_type = detected[:32]
    document.update_own_row(detected_type=document.detected_type)
    return detected


def touch_started(document: Document) -> None:
    if document.started_at is None:
        document.started_at = timezone.now()
        Document.objects.filter(pk=document.pk, started_at__isnull=True).update(started_at=document.started_at)
