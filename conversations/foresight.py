"""A MemCell's foresight as memories of kind "foresight": children of its episode (deleted with it),
each citing the message it came from, its validity window in metadata (ISO 8601, UTC)."""

from datetime import timezone

from django.conf import settings

from extraction.base import Passage
from extraction.foresight import ForesightItem, extract_foresight, has_future_cue, llm_foresight
from memory.models import Memory, Message
from memory.ids import memory_uuid


def plan_foresight(messages: list[Message], speakers: list[str]) -> list[ForesightItem]:
    """The foresight of a MemCell: the model's when one is configured and the turns hold a future cue,
    else (or when the model fails) the deterministic rules'. Runs outside any transaction."""
    passages = [Passage(m.message_id, m.content, s, m.timestamp) for m, s in zip(messages, speakers)]
    if settings.LLM_ENABLED and has_future_cue(passages):
        from_model = llm_foresight(passages)
        if from_model is not None:
            return from_model
    return extract_foresight(passages)


def foresight_memories(episode: Memory, items: list[ForesightItem], attributed) -> list[Memory]:
    """Unsaved rows for `items` under `episode`, with fixed ids (a re-extraction overwrites, never duplicates)."""
    rows = []
    for i, item in enumerate(items):
        text = attributed(item.text.strip(), item.speaker)
        rows.append(Memory(
            id=memory_uuid("conv", episode.kb_id, episode.user_id, episode.segment_id, "foresight", i),
            tenant_id=episode.tenant_id, kb_id=episode.kb_id, kind=Memory.Kind.FORESIGHT, parent=episode,
            ordinal=i, text=text, topic=episode.topic, source_message_ids=[item.source_id] if item.source_id else [],
            user_id=episode.user_id, session_id=episode.session_id, segment_id=episode.segment_id,
            occurred_at=item.valid_from, extraction_mode=item.mode, content_hash=Memory.hash_text(text),
            metadata={"subject": item.speaker, "valid_from": utc_iso(item.valid_from),
                      "valid_until": utc_iso(item.valid_until), "cue": item.cue[:100]},
        ))
    return rows


def utc_iso(value) -> str:
    """The one format windows are stored and compared in: text order is time order."""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
