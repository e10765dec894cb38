"""The shapes the API answers, as TypedDicts: the JSON itself, typed for editors and checkers."""

from __future__ import annotations  # `str | None` below on Python 3.9

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict

Method = Literal["keyword", "vector", "hybrid", "agentic"]
MemoryType = Literal["episode", "atomic_fact", "chunk", "profile", "foresight"]
DocumentStatus = Literal["queued", "parsing", "extracting", "indexing", "ready", "failed"]


class ChatMessage(TypedDict):
    content: str
    timestamp: str  # ISO 8601 (a datetime is converted); without a zone it is read as UTC
    role: NotRequired[str]
    sender_id: NotRequired[str]
    sender_name: NotRequired[str]
    message_id: NotRequired[str]


class AddResult(TypedDict):
    status: Literal["accumulated", "extracted", "queued"]  # queued: only with wait=False (see job_id)
    message_count: int
    kb: str
    segments: NotRequired[int]
    episodes: NotRequired[int]
    facts: NotRequired[int]
    job_id: NotRequired[str]  # the extraction job, where one ran
    status_url: NotRequired[str]  # queued: GET it (or `memories.job(job_id)`) for the answer


class FlushResult(TypedDict):
    status: Literal["extracted", "no_extraction", "queued"]  # queued: only with wait=False (see job_id)
    segments: NotRequired[int]
    episodes: NotRequired[int]
    facts: NotRequired[int]
    job_id: NotRequired[str]
    status_url: NotRequired[str]


class Source(TypedDict, total=False):
    """Where an item came from: a chat message, or a document's chunk (page, slide, sheet, time)."""

    type: Literal["message", "chunk"]
    message_id: str
    session_id: str
    document_id: int
    document_name: str
    chunk_id: int
    page: int
    slide: int
    sheet: str
    start_time: float


class Fact(TypedDict):
    id: str
    atomic_fact: str
    score: float
    kb: str
    sources: list[Source]
    parent_episode_id: NotRequired[str | None]
    scores: NotRequired[dict[str, float]]


class Episode(TypedDict):
    id: str
    summary: str
    topic_name: str
    score: float
    kb: str
    sources: list[Source]
    atomic_facts: list[Fact]


class Chunk(TypedDict):
    id: int
    text: str
    score: float
    sources: list[Source]


class SearchResponse(TypedDict):
    facts: list[Fact]
    episodes: list[Episode]
    chunks: list[Chunk]
    raw_messages: list[dict[str, Any]]
    profiles: list[dict[str, Any]]
    query: dict[str, Any]  # text, method, answered_by, filters_applied, notes, took_ms


class Memory(TypedDict):
    id: str
    memory_type: Literal["episode", "atomic_fact"]
    kb: str
    text: str
    topic: str
    user_id: str
    session_id: str
    occurred_at: str | None
    created_at: str
    status: str
    parent_episode_id: str | None
    source_message_ids: list[str]
    document_id: int | None


class MemoryPage(TypedDict):
    count: int
    next: str | None
    previous: str | None
    results: list[Memory]


class Deleted(TypedDict):
    status: Literal["deleted"]
    deleted: int


class Document(TypedDict):
    id: int
    kb: str
    filename: str
    sha256: str
    size: int
    status: DocumentStatus
    stage: str
    progress: int
    error: str
    chunk_count: int
    episode_count: int
    fact_count: int
    created_at: str
    finished_at: str | None
    download_url: str


class DocumentPage(TypedDict):
    count: int
    next: str | None
    previous: str | None
    results: list[Document]


class MemoryState(TypedDict):
    text: str
    status: str


class HistoryEntry(TypedDict):
    """One change: ADD (before is None), UPDATE, or DELETE (after is None)."""

    id: int
    memory_id: str
    event: Literal["ADD", "UPDATE", "DELETE"]
    actor: str
    reason: str
    created_at: str
    before: MemoryState | None
    after: MemoryState | None


class MemoryHistory(TypedDict):
    memory_id: str
    history: list[HistoryEntry]  # oldest first


class Upload(TypedDict):
    document: Document
    duplicate: bool


class KnowledgeBase(TypedDict):
    id: int
    slug: str
    name: str
    description: str
    language: str
    document_count: int
    memory_count: int
