"""The async client's resources (`loci.memories`, `loci.documents`, …): the sync ones' twins, awaited."""

from __future__ import annotations  # methods named `list` must not shadow the annotations after them

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from loci_client import jobs
from loci_client.endpoints import FINISHED, _all_pages_async, _calls, _upload_kb, _without_none
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
    from loci_client.client import AsyncLoci


class AsyncMemories:
    def __init__(self, client: AsyncLoci):
        self._client = client

    async def add(self, user_id: str, session_id: str, messages: Iterable[ChatMessage | dict], *,
                  kb: str | None = None, agent_id: str | None = None, group_id: str | None = None,
                  run_id: str | None = None, metadata: dict | None = None, wait: bool = True,
                  timeout: float = 600.0) -> AddResult:
        """As `Loci.memories.add`: wait=True awaits a queued extraction's answer (polling its job)."""
        answer = await self._client._send(_calls.add(user_id, session_id, messages, kb, agent_id, group_id, run_id,
                                                     metadata))
        return await self._settled(answer, wait, timeout)

    async def flush(self, user_id: str, session_id: str, *, kb: str | None = None, wait: bool = True,
                    timeout: float = 600.0) -> FlushResult:
        return await self._settled(await self._client._send(_calls.flush(user_id, session_id, kb)), wait, timeout)

    async def job(self, job_id: str) -> dict:
        return await self._client._send(_calls.job_by_id(job_id))

    async def _settled(self, answer, wait: bool, timeout: float):
        if not (wait and jobs.is_queued(answer)):
            return answer
        return await jobs.wait_async(lambda url: self._client._send(_calls.job(url)), answer, timeout)

    async def list(self, **filters) -> MemoryPage:
        return await self._client._send(_calls.list_memories(**filters))

    async def get(self, memory_id: str) -> Memory:
        return await self._client._send(_calls.memory("GET", memory_id))

    async def update(self, memory_id: str, *, text: str | None = None, status: str | None = None) -> Memory:
        return await self._client._send(_calls.memory("PATCH", memory_id, _without_none(text=text, status=status)))

    async def history(self, memory_id: str) -> MemoryHistory:
        return await self._client._send(_calls.memory_history(memory_id))

    async def delete(self, memory_id: str) -> Deleted:
        return await self._client._send(_calls.memory("DELETE", memory_id))

    async def feedback(self, memory_id: str, outcome: str, *, note: str | None = None) -> dict:
        return await self._client._send(_calls.feedback(memory_id, outcome, note))

    async def delete_user(self, user_id: str, *, session_id: str | None = None, kb: str | None = None) -> Deleted:
        return await self._client._send(_calls.delete_user(user_id, session_id, kb))


class AsyncProfiles:
    def __init__(self, client: AsyncLoci):
        self._client = client

    async def get(self, user_id: str, **params) -> dict:
        return await self._client._send(_calls.profile(user_id, **params))


class AsyncEntities:
    def __init__(self, client: AsyncLoci):
        self._client = client

    async def list(self, **params) -> dict:
        return await self._client._send(_calls.entities(**params))

    async def get(self, entity_id: int) -> dict:
        return await self._client._send(_calls.entity(entity_id))


class AsyncDocuments:
    def __init__(self, client: AsyncLoci):
        self._client = client

    async def upload(self, path: str | Path, *, kb: str | None = None, content_type: str | None = None,
                     metadata: dict | None = None) -> Upload:
        return (await self._client._send(_calls.upload(path, _upload_kb(kb, self._client.kb), content_type,
                                                       metadata)))[0]

    async def list(self, **filters) -> DocumentPage:
        return await self._client._send(_calls.documents(**filters))

    async def get(self, document_id: int) -> Document:
        return await self._client._send(_calls.document("GET", document_id))

    async def chunks(self, document_id: int, *, page: int = 1) -> dict:
        return await self._client._send(_calls.document("GET", document_id, "chunks", {"page": page}))

    async def original(self, document_id: int) -> bytes:
        return await self._client._send(_calls.document("GET", document_id, "original"))

    async def rerun(self, document_id: int) -> Document:
        return await self._client._send(_calls.document("POST", document_id, "rerun"))

    async def cancel(self, document_id: int) -> Document:
        return await self._client._send(_calls.document("POST", document_id, "cancel"))

    async def delete(self, document_id: int) -> None:
        await self._client._send(_calls.document("DELETE", document_id))

    async def wait(self, document_id: int, *, timeout: float = 600.0, interval: float = 1.0) -> Document:
        deadline = time.monotonic() + timeout
        while True:
            document = await self.get(document_id)
            if document["status"] in FINISHED:
                return document
            if time.monotonic() >= deadline:
                raise TimeoutError(f"Document {document_id} is still {document['status']} after {timeout:g} s.")
            await asyncio.sleep(interval)


class AsyncKnowledgeBases:
    def __init__(self, client: AsyncLoci):
        self._client = client

    async def list(self) -> list[KnowledgeBase]:
        return await _all_pages_async(self._client._send, _calls.knowledge_bases)

    async def get(self, slug: str) -> KnowledgeBase:
        return await self._client._send(_calls.knowledge_base("GET", slug))

    async def create(self, slug: str, name: str, *, description: str = "",
                     language: str | None = None) -> KnowledgeBase:
        return await self._client._send(_calls.knowledge_base("POST", body=_without_none(
            slug=slug, name=name, description=description, language=language)))

    async def update(self, slug: str, **fields) -> KnowledgeBase:
        return await self._client._send(_calls.knowledge_base("PATCH", slug, fields))

    async def delete(self, slug: str) -> None:
        await self._client._send(_calls.knowledge_base("DELETE", slug))


class AsyncWebhooks:
    def __init__(self, client: AsyncLoci):
        self._client = client

    async def list(self) -> list[dict]:
        return await _all_pages_async(self._client._send, lambda page: _calls.webhook("GET", params={"page": page}))

    async def create(self, url: str, *, kb: str | None = None, events: list[str] | None = None,
                     description: str = "") -> dict:
        return await self._client._send(_calls.webhook("POST", body=_without_none(
            url=url, kb=kb, events=events, description=description)))

    async def get(self, webhook_id: int) -> dict:
        return await self._client._send(_calls.webhook("GET", webhook_id))

    async def update(self, webhook_id: int, **fields) -> dict:
        return await self._client._send(_calls.webhook("PATCH", webhook_id, body=fields))

    async def delete(self, webhook_id: int) -> None:
        await self._client._send(_calls.webhook("DELETE", webhook_id))

    async def deliveries(self, webhook_id: int, *, page: int = 1) -> dict:
        return await self._client._send(_calls.webhook("GET", webhook_id, "deliveries", params={"page": page}))


class AsyncTenants:
    def __init__(self, client: AsyncLoci):
        self._client = client

    async def list(self) -> list[dict]:
        return await self._client._send(_calls.tenants())
