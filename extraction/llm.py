"""The LLM extractor: the chat model writes the episode and facts; a failed unit falls back to rules."""

import logging
import re
from datetime import datetime, time

from extraction.base import ExtractedEpisode, ExtractedFact, ExtractionUnit, Passage
from extraction.deterministic import DeterministicExtractor
from extraction.prompts import extraction_messages

logger = logging.getLogger(__name__)

MAX_FACTS = 60  # a runaway reply (a model repeating itself) must not flood the index
_DATE = re.compile(r"^\s*(\d{4})(?:-(\d{1,2}))?(?:-(\d{1,2}))?")


def check_reply(obj: dict) -> None:
    """Reject replies whose shape is wrong, so complete_json retries them with the reason."""
    if not isinstance(obj.get("summary"), str) or not obj["summary"].strip():
        raise ValueError('"summary" must be a non-empty string')
    if "topic" in obj and obj["topic"] is not None and not isinstance(obj["topic"], str):
        raise ValueError('"topic" must be a string')
    facts = obj.get("facts")
    if not isinstance(facts, list):
        raise ValueError('"facts" must be a list')
    for i, fact in enumerate(facts):
        if not isinstance(fact, dict) or not isinstance(fact.get("text"), str):
            raise ValueError(f'facts[{i}] must be an object with a string "text"')
        sources = fact.get("sources", [])
        if not isinstance(sources, list) or not all(_as_number(s) is not None for s in sources):
            raise ValueError(f"facts[{i}].sources must be a list of passage numbers")
        if fact.get("occurred_at") is not None and not isinstance(fact["occurred_at"], str):
            raise ValueError(f'facts[{i}].occurred_at must be "YYYY-MM-DD" or null')


ENTITY_TYPES = ("person", "organization", "place", "work", "date", "amount", "other")
MAX_ENTITIES = 20  # per fact
# The reply's JSON Schema, sent where the server takes one (common/llm_formats.py): what check_reply
# accepts, lists bounded, no empty summary (SmolLM2's most common miss under the schema without it).
# No maxLength: llama-cpp-python unrolls it into a grammar llama.cpp fails to parse, and its server
# process dies (seen with SmolLM2, tests/test_real_llm.py).
REPLY_SCHEMA = {
    "type": "object",
    "properties": {
        "topic": {"type": "string"},
        "summary": {"type": "string", "minLength": 1},
        "facts": {"type": "array", "maxItems": MAX_FACTS, "items": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1},
                "sources": {"type": "array", "items": {"type": "integer"}, "maxItems": 20},
                "occurred_at": {"type": ["string", "null"]},
                "entities": {"type": "array", "maxItems": MAX_ENTITIES, "items": {
                    "type": "object", "properties": {"name": {"type": "string"}, "type": {"enum": list(ENTITY_TYPES)}},
                    "required": ["name", "type"], "additionalProperties": False}},
            },
            "required": ["text", "sources"],
            "additionalProperties": False,
        }},
    },
    "required": ["topic", "summary", "facts"],
    "additionalProperties": False,
}


class LlmExtractor:
    """Extraction by an OpenAI-compatible chat model, with the deterministic extractor as per-unit fallback."""

    mode = "llm"

    def __init__(self, fallback=None):
        self.fallback = fallback or DeterministicExtractor()

    def extract(self, unit: ExtractionUnit) -> ExtractedEpisode:
        from common.llm import LlmError, complete_json  # noqa: PLC0415 - keeps the openai import off the default path

        passages = [p for p in unit.passages if p.text and p.text.strip()]
        if not passages:
            return self._fallback(unit, "the unit has no text")
        try:
            reply = complete_json(extraction_messages(unit, passages), schema_check=check_reply, step="extraction",
                                  schema=REPLY_SCHEMA)
        except LlmError as exc:
            logger.warning("LLM extraction failed, using the deterministic extractor for this unit: %s", exc)
            return self._fallback(unit, f"LLM extraction failed: {exc}")
        episode = episode_from_reply(reply, unit, passages)
        episode.mode = self.mode
        return episode

    def _fallback(self, unit: ExtractionUnit, reason: str) -> ExtractedEpisode:
        episode = self.fallback.extract(unit)
        episode.mode = "deterministic"
        episode.warning = reason  # the pipeline records it next to extraction_mode
        return episode


def episode_from_reply(reply: dict, unit: ExtractionUnit, passages: list[Passage]) -> ExtractedEpisode:
    """Map a validated reply onto the unit: passage numbers become source ids, dates become datetimes."""
    all_ids = [p.source_id for p in passages]
    tz = next((p.timestamp.tzinfo for p in passages if p.timestamp), None) or (
        unit.reference_time.tzinfo if unit.reference_time else None
    )
    conversation = any(p.speaker for p in passages)
    facts: list[ExtractedFact] = []
    seen: dict[str, ExtractedFact] = {}
    for item in reply.get("facts", []):
        text = " ".join(item["text"].split())
        if not text:
            continue
        numbers = [_as_number(s) for s in item.get("sources") or []]
        cited = [passages[n - 1] for n in dict.fromkeys(numbers) if n is not None and 1 <= n <= len(passages)]
        # A fact whose citations are all out of range still came from this unit: cite the whole unit.
        source_ids = [p.source_id for p in cited] or list(all_ids)
        occurred_at = _parse_date(item.get("occurred_at"), tz)
        if occurred_at is None and conversation:
            occurred_at = next((p.timestamp for p in cited if p.timestamp), None)
        subject = next((p.speaker for p in cited if p.speaker), "") if conversation else ""
        key = re.sub(r"[\W_]+", " ", text.lower()).strip()
        if key in seen:
            seen[key].source_ids = list(dict.fromkeys(seen[key].source_ids + source_ids))
            continue
        fact = ExtractedFact(text, source_ids, occurred_at, subject, entities=reply_entities(item.get("entities")))
        seen[key] = fact
        facts.append(fact)
    stamps = [p.timestamp for p in passages if p.timestamp]
    return ExtractedEpisode(
        topic=(reply.get("topic") or "").strip() or unit.topic_hint,
        summary=" ".join(reply["summary"].split()),
        facts=facts[:MAX_FACTS],
        source_ids=all_ids,
        occurred_at=min(stamps) if stamps else unit.reference_time,
    )


def reply_entities(items) -> list[dict]:
    """The fact's entity list as far as it is usable: a missing or malformed list is no entity, not a retry
    (the rules find names anyway); an unknown type reads as "other"."""
    if not isinstance(items, list):
        return []
    out = []
    for item in items[:MAX_ENTITIES]:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            continue
        kind = item.get("type") if item.get("type") in ENTITY_TYPES else "other"
        out.append({"name": " ".join(item["name"].split())[:200], "type": kind})
    return out


def _as_number(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = re.fullmatch(r"\s*\[?(\d+)\]?\s*", value)  # models sometimes echo "[2]"
        return int(match.group(1)) if match else None
    return None


def _parse_date(value, tz) -> datetime | None:
    if not isinstance(value, str):
        return None
    match = _DATE.match(value)
    if not match:
        return None
    year, month, day = int(match.group(1)), int(match.group(2) or 1), int(match.group(3) or 1)
    try:
        return datetime.combine(datetime(year, month, day).date(), time.min, tzinfo=tz)
    except ValueError:
        return None
