"""The sync client's resources (`loci.memories`, `loci.documents`, …): one method per endpoint, sent through
the `Loci` they belong to."""

from __future__ import annotations  # methods named `list` must not shadow the annotations after them

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from loci_client import jobs
from loci_client.endpoints import FINISHED, _all_pages, _calls, _upload_kb, _without_none
from loci_client.types import (
    AddResult,
    ChatMessage,
    Deleted,
    Document,
    DocumentPage,
    FlushResult,
    KnowledgeBase,
    Memory,
    MemoryHistory,
    MemoryPage,
    Upload,
)

if TYPE_CHECKING:
    from loci_client.client import Loci


class Memories:
    def __init__(self, client: Loci):
        self._client = client

    def add(self, user_id: str, session_id: str, messages: Iterable[ChatMessage | dict], *, kb: str | None = None,
            agent_id: str | None = None, group_id: str | None = None, run_id: str | None = None,
            metadata: dict | None = None, wait: bool = True, timeout: float = 600.0) -> AddResult:
        """Post chat turns (1–500) and extract the MemCells they complete. agent_id, group_id and run_id scope
        the memories; metadata (string or number values) is kept on each and filterable.

        wait=True (the default, so code written before extraction was queued keeps its answer): where the
        server queues extraction (an LLM is configured) this polls the job until it is done and returns the
        answer the synchronous request gives; no HTTP request is held while the model works, and
        TimeoutError comes after `timeout` s. wait=False returns the server's answer as it is: with the
        rules alone the extraction's, else {"status": "queued", "job_id", "status_url"} (see `job`)."""
        answer = self._client._send(_calls.add(user_id, session_id, messages, kb, agent_id, group_id, run_id,
                                               metadata))
        return self._settled(answer, wait, timeout)

    def flush(self, user_id: str, session_id: str, *, kb: str | None = None, wait: bool = True,
              timeout: float = 600.0) -> FlushResult:
        """Extract everything accumulated for the session, the unfinished tail included; `wait` as in `add`."""
        return self._settled(self._client._send(_calls.flush(user_id, session_id, kb)), wait, timeout)

    def job(self, job_id: str) -> dict:
        """An extraction job: pending, running, done (with `result`) or failed (with `error`)."""
        return self._client._send(_calls.job_by_id(job_id))

    def _settled(self, answer, wait: bool, timeout: float):
        if not (wait and jobs.is_queued(answer)):
            return answer
        return jobs.wait(lambda url: self._client._send(_calls.job(url)), answer, timeout)

    def list(self, **filters) -> MemoryPage:
        """One page of memories: memory_type, user_id, session_id, kb, status, start, end, ordering, page, page_size."""
        return self._client._send(_calls.list_memories(**filters))

    def get(self, memory_id: str) -> Memory:
        return self._client._send(_calls.memory("GET", memory_id))

    def update(self, memory_id: str, *, text: str | None = None, status: str | None = None) -> Memory:
        """Correct a memory's text or set its status (active/disabled); the change is kept in its history."""
        return self._client._send(_calls.memory("PATCH", memory_id, _without_none(text=text, status=status)))

    def history(self, memory_id: str) -> MemoryHistory:
        """Every change to the memory, oldest first (kept after the memory is deleted)."""
        return self._client._send(_calls.memory_history(memory_id))

    def delete(self, memory_id: str) -> Deleted:
        """Delete a memory (an episode takes its facts along) from the database and both indexes."""
        return self._client._send(_calls.memory("DELETE", memory_id))

    def feedback(self, memory_id: str, outcome: str, *, note: str | None = None) -> dict:
        """How reusing an agent case or skill went (success or failure): moves its quality or maturity."""
        return self._client._send(_calls.feedback(memory_id, outcome, note))

    def delete_user(self, user_id: str, *, session_id: str | None = None, kb: str | None = None) -> Deleted:
        """Delete a user's (or one session's) memories and raw messages."""
        return self._client._send(_calls.delete_user(user_id, session_id, kb))


class Profiles:
    def __init__(self, client: Loci):
        self._client = client

    def get(self, user_id: str, **params) -> dict:
        """The user's profile items (kb, subject, status filter them), each citing its facts."""
        return self._client._send(_calls.profile(user_id, **params))


class Entities:
    def __init__(self, client: Loci):
        self._client = client

    def list(self, **params) -> dict:
        """One page of entities: q, type, kb, page, page_size."""
        return self._client._send(_calls.entities(**params))

    def get(self, entity_id: int) -> dict:
        """An entity with its aliases and the memories that mention it."""
        return self._client._send(_calls.entity(entity_id))


class Documents:
    def __init__(self, client: Loci):
        self._client = client

    def upload(self, path: str | Path, *, kb: str | None = None, content_type: str | None = None,
               metadata: dict | None = None) -> Upload:
        """Upload one file; it is processed in the background (see wait). A file already there is duplicate=True.
        metadata: string or number values kept on its chunks and memories, filterable in search."""
        return self._client._send(_calls.upload(path, _upload_kb(kb, self._client.kb), content_type, metadata))[0]

    def list(self, **filters) -> DocumentPage:
        """One page of documents (the server's filters: kb, status, q, ordering, page, page_size)."""
        return self._client._send(_calls.documents(**filters))

    def get(self, document_id: int) -> Document:
        return self._client._send(_calls.document("GET", document_id))

    def chunks(self, document_id: int, *, page: int = 1) -> dict:
        """One page of the parsed structure: parent and child chunks in order."""
        return self._client._send(_calls.document("GET", document_id, "chunks", {"page": page}))

    def original(self, document_id: int) -> bytes:
        """The original file's bytes, as uploaded."""
        return self._client._send(_calls.document("GET", document_id, "original"))

    def rerun(self, document_id: int) -> Document:
        """Process a finished document again from its original."""
        return self._client._send(_calls.document("POST", document_id, "rerun"))

    def cancel(self, document_id: int) -> Document:
        """Stop a document's processing; it ends failed with the reason 'cancelled'."""
        return self._client._send(_calls.document("POST", document_id, "cancel"))

    def delete(self, document_id: int) -> None:
        self._client._send(_calls.document("DELETE", document_id))

    def wait(self, document_id: int, *, timeout: float = 600.0, interval: float = 1.0) -> Document:
        """Poll until the document is ready or failed (check `status` and `error`); TimeoutError after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            document = self.get(document_id)
            if document["status"] in FINISHED:
                return document
            if time.monotonic() >= deadline:
                raise TimeoutError(f"Document {document_id} is still {document['status']} after {timeout:g} s.")
            time.sleep(interval)


class KnowledgeBases:
    def __init__(self, client: Loci):
        self._client = client

    def list(self) -> list[KnowledgeBase]:
        """Every knowledge base the key may read (all pages)."""
        return _all_pages(self._client._send, _calls.knowledge_bases)

    def get(self, slug: str) -> KnowledgeBase:
        return self._client._send(_calls.knowledge_base("GET", slug))

    def create(self, slug: str, name: str, *, description: str = "", language: str | None = None) -> KnowledgeBase:
        """A new knowledge base (owners and admins, or a read-write key for the whole tenant)."""
        return self._client._send(_calls.knowledge_base("POST", body=_without_none(
            slug=slug, name=name, description=description, language=language)))

    def update(self, slug: str, **fields) -> KnowledgeBase:
        """Change name, description or language."""
        return self._client._send(_calls.knowledge_base("PATCH", slug, fields))

    def delete(self, slug: str) -> None:
        """Delete the knowledge base with everything in it."""
        self._client._send(_calls.knowledge_base("DELETE", slug))


class Webhooks:
    def __init__(self, client: Loci):
        self._client = client

    def list(self) -> list[dict]:
        return _all_pages(self._client._send, lambda page: _calls.webhook("GET", params={"page": page}))

    def create(self, url: str, *, kb: str | None = None, events: list[str] | None = None,
               description: str = "") -> dict:
        """Register a URL for signed events; the answer carries the signing secret, shown this once."""
        return self._client._send(_calls.webhook("POST", body=_without_none(
            url=url, kb=kb, events=events, description=description)))

    def get(self, webhook_id: int) -> dict:
        return self._client._send(_calls.webhook("GET", webhook_id))

    def update(self, webhook_id: int, **fields) -> dict:
        """Change url, events, description or is_active."""
        return self._client._send(_calls.webhook("PATCH", webhook_id, body=fields))

    def delete(self, webhook_id: int) -> None:
        self._client._send(_calls.webhook("DELETE", webhook_id))

    def deliveries(self, webhook_id: int, *, page: int = 1) -> dict:
        """One page of the webhook's deliveries, newest first, with status, attempts and last error."""
        return self._client._send(_calls.webhook("GET", webhook_id, "deliveries", params={"page": page}))


class Tenants:
    def __init__(self, client: Loci):
        self._client = client

    def list(self) -> list[dict]:
        """The tenant the key belongs to (a user's session lists every tenant of theirs)."""
        return self._client._send(_calls.tenants())

