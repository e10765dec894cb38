"""One interface for turning a passage group (a section, a conversation segment) into memories."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


class ExtractionError(Exception):
    """The extractor could not produce valid output after its retries."""


@dataclass
class Passage:
    """A citable piece of source: a child chunk of a document or a chat message."""

    source_id: str  # chunk pk as a string, or a client message id
    text: str
    speaker: str = ""
    timestamp: datetime | None = None


@dataclass
class ExtractionUnit:
    """What one episode is made from."""

    topic_hint: str  # the section title / path, or "" for conversations
    passages: list[Passage]
    language: str = "auto"  # auto | en | zh
    reference_time: datetime | None = None  # to make relative dates absolute
    context: dict = field(default_factory=dict)  # document name, section path, participants


@dataclass
class ExtractedFact:
    text: str
    source_ids: list[str]  # Passage.source_id values this fact came from
    occurred_at: datetime | None = None
    subject: str = ""
    note: bool = False  # what a chat client noted ("shares a photo of …"): an event, never a restatement
    entities: list[dict] = field(default_factory=list)  # [{"name", "type"}] an LLM listed; rules find their own


def llm_entities(fact: ExtractedFact) -> dict:
    """The metadata that keeps an LLM's entity list with its memory (the entity store is rebuilt from it)."""
    return {"entities": fact.entities} if fact.entities else {}


@dataclass
class ExtractedEpisode:
    topic: str
    summary: str
    facts: list[ExtractedFact]
    source_ids: list[str]
    occurred_at: datetime | None = None


class Extractor(Protocol):
    mode: str  # "llm" or "deterministic"

    def extract(self, unit: ExtractionUnit) -> ExtractedEpisode: ...
