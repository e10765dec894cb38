"""`Loci` (sync) and `AsyncLoci` (async): the REST API, one method per endpoint, on httpx.

Each endpoint is written once, as a `_Call` (method, path, body) built by the `_calls` functions; the
sync and async clients differ only in how they send it. Every error answer raises a LociError.
"""

from __future__ import annotations  # methods named `list` must not shadow the annotations after them

import asyncio
import json
import mimetypes
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from loci_client.errors import error_for
from loci_client.types import (
    AddResult,
    ChatMessage,
    Deleted,
    Document,
    FlushResult,
    KnowledgeBase,
    Memory,
    MemoryPage,
    SearchResponse,
    Upload,
)

FINISHED = ("ready", "failed")


@dataclass
class _Call:
    method: str
    path: str
    json: Any = None
    params: dict = field(default_factory=dict)
    files: list | None = None
    data: dict | None = None


def _messages(messages: Iterable[ChatMessage | dict]) -> list[dict]:
    out = []
    for m in messages:
        m = dict(m)
        if isinstance(m.get("timestamp"), datetime):
            m["timestamp"] = m["timestamp"].isoformat()
        out.append(m)
    return out


def _without_none(**values) -> dict:
    return {k: v for k, v in values.items() if v is not None}


class _calls:
    """The endpoints, as requests to send."""

    @staticmethod
    def add(user_id, session_id, messages, kb, agent_id, group_id, run_id=None, metadata=None) -> _Call:
        return _Call("POST", "/api/v1/memories", _without_none(
            user_id=user_id, session_id=session_id, messages=_messages(messages), kb=kb, agent_id=agent_id,
            group_id=group_id, run_id=run_id, metadata=metadata))

    @staticmethod
    def flush(user_id, session_id, kb) -> _Call:
        return _Call("POST", "/api/v1/memories/flush", _without_none(user_id=user_id, session_id=session_id, kb=kb))

    @staticmethod
    def list_memories(**params) -> _Call:
        return _Call("GET", "/api/v1/memories", params=_without_none(**params))

    @staticmethod
    def memory(method: str, memory_id: str) -> _Call:
        return _Call(method, f"/api/v1/memories/{memory_id}")

    @staticmethod
    def search(query, method, top_k, memory_types, filters, expand_context, neighbours, rerank) -> _Call:
        return _Call("POST", "/api/v1/memories/search", _without_none(
            query=query, method=method, top_k=top_k, memory_types=memory_types, filters=filters,
            expand_context=expand_context, neighbours=neighbours, rerank=rerank))

    @staticmethod
    def upload(path, kb, content_type, metadata=None) -> _Call:
        path = Path(path)
        kind = content_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        files = [("files", (path.name, path.read_bytes(), kind))]
        data = {"kb": kb, **({"metadata": json.dumps(metadata)} if metadata else {})}
        return _Call("POST", "/api/v1/documents", data=data, files=files)

    @staticmethod
    def document(method: str, document_id: int) -> _Call:
        return _Call(method, f"/api/v1/documents/{int(document_id)}")

    @staticmethod
    def knowledge_bases(page: int) -> _Call:
        return _Call("GET", "/api/v1/knowledge-bases", params={"page": page})


def _result(response: httpx.Response):
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = response.text
    if response.status_code >= 400:
        raise error_for(response.status_code, body, response.headers.get("Retry-After"))
    return body


def _headers(api_key: str, headers: dict | None) -> dict:
    return {"Authorization": f"Bearer {api_key}", "Accept": "application/json", **(headers or {})}


def _upload_kb(kb: str | None, default: str | None) -> str:
    if not (kb or default):
        raise ValueError("Name the knowledge base: documents.upload(path, kb='docs') or Loci(..., kb='docs').")
    return kb or default


class Loci:
    """A client of one Loci server, acting as one API key.

        loci = Loci("http://127.0.0.1:8000", "loci_…", kb="docs")
        loci.memories.add("u1", "s1", [{"role": "user", "content": "…", "timestamp": "2024-05-01T10:00:00Z"}])
        loci.memories.flush("u1", "s1")
        hits = loci.search("Where did I go?", method="hybrid", top_k=5)
    """

    def __init__(self, base_url: str, api_key: str, *, kb: str | None = None, timeout: float = 60.0,
                 headers: dict | None = None, transport: httpx.BaseTransport | None = None):
        self.kb = kb
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=_headers(api_key, headers), timeout=timeout,
                                  transport=transport)
        self.memories = Memories(self)
        self.documents = Documents(self)
        self.knowledge_bases = KnowledgeBases(self)

    def _send(self, call: _Call):
        return _result(self._http.request(call.method, call.path, json=call.json, params=call.params,
                                          files=call.files, data=call.data))

    def search(self, query: str, *, method: str = "hybrid", top_k: int = 10, memory_types: list[str] | None = None,
               filters: dict | None = None, expand_context: bool | None = None, neighbours: int | None = None,
               rerank: bool | None = None) -> SearchResponse:
        """Search the memories (and chunks, with memory_types=["chunk"]) the key may read; items keep their sources."""
        return self._send(_calls.search(query, method, top_k, memory_types, filters, expand_context, neighbours,
                                        rerank))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Loci":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Memories:
    def __init__(self, client: Loci):
        self._client = client

    def add(self, user_id: str, session_id: str, messages: Iterable[ChatMessage | dict], *, kb: str | None = None,
            agent_id: str | None = None, group_id: str | None = None, run_id: str | None = None,
            metadata: dict | None = None) -> AddResult:
        """Post chat turns (1–500); the MemCells they complete are extracted at once. agent_id, group_id and
        run_id scope the memories; metadata (string or number values) is kept on each and filterable."""
        return self._client._send(_calls.add(user_id, session_id, messages, kb, agent_id, group_id, run_id, metadata))

    def flush(self, user_id: str, session_id: str, *, kb: str | None = None) -> FlushResult:
        """Extract everything accumulated for the session, the unfinished tail included."""
        return self._client._send(_calls.flush(user_id, session_id, kb))

    def list(self, **filters) -> MemoryPage:
        """One page of memories: memory_type, user_id, session_id, kb, status, start, end, ordering, page, page_size."""
        return self._client._send(_calls.list_memories(**filters))

    def get(self, memory_id: str) -> Memory:
        return self._client._send(_calls.memory("GET", memory_id))

    def delete(self, memory_id: str) -> Deleted:
        """Delete a memory (an episode takes its facts along) from the database and both indexes."""
        return self._client._send(_calls.memory("DELETE", memory_id))


class Documents:
    def __init__(self, client: Loci):
        self._client = client

    def upload(self, path: str | Path, *, kb: str | None = None, content_type: str | None = None,
               metadata: dict | None = None) -> Upload:
        """Upload one file; it is processed in the background (see wait). A file already there is duplicate=True.
        metadata: string or number values kept on its chunks and memories, filterable in search."""
        return self._client._send(_calls.upload(path, _upload_kb(kb, self._client.kb), content_type, metadata))[0]

    def get(self, document_id: int) -> Document:
        return self._client._send(_calls.document("GET", document_id))

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
        found, page = [], 1
        while True:
            body = self._client._send(_calls.knowledge_bases(page))
            found += body["results"]
            if not body.get("next"):
                return found
            page += 1


class AsyncLoci:
    """The async twin of `Loci`: the same methods, awaited.

        async with AsyncLoci("http://127.0.0.1:8000", "loci_…") as loci:
            hits = await loci.search("Where did I go?")
    """

    def __init__(self, base_url: str, api_key: str, *, kb: str | None = None, timeout: float = 60.0,
                 headers: dict | None = None, transport: httpx.AsyncBaseTransport | None = None):
        self.kb = kb
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=_headers(api_key, headers),
                                       timeout=timeout, transport=transport)
        self.memories = AsyncMemories(self)
        self.documents = AsyncDocuments(self)
        self.knowledge_bases = AsyncKnowledgeBases(self)

    async def _send(self, call: _Call):
        return _result(await self._http.request(call.method, call.path, json=call.json, params=call.params,
                                                files=call.files, data=call.data))

    async def search(self, query: str, *, method: str = "hybrid", top_k: int = 10,
                     memory_types: list[str] | None = None, filters: dict | None = None,
                     expand_context: bool | None = None, neighbours: int | None = None,
                     rerank: bool | None = None) -> SearchResponse:
        return await self._send(_calls.search(query, method, top_k, memory_types, filters, expand_context,
                                              neighbours, rerank))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncLoci":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


class AsyncMemories:
    def __init__(self, client: AsyncLoci):
        self._client = client

    async def add(self, user_id: str, session_id: str, messages: Iterable[ChatMessage | dict], *,
                  kb: str | None = None, agent_id: str | None = None, group_id: str | None = None,
                  run_id: str | None = None, metadata: dict | None = None) -> AddResult:
        return await self._client._send(_calls.add(user_id, session_id, messages, kb, agent_id, group_id, run_id,
                                                   metadata))

    async def flush(self, user_id: str, session_id: str, *, kb: str | None = None) -> FlushResult:
        return await self._client._send(_calls.flush(user_id, session_id, kb))

    async def list(self, **filters) -> MemoryPage:
        return await self._client._send(_calls.list_memories(**filters))

    async def get(self, memory_id: str) -> Memory:
        return await self._client._send(_calls.memory("GET", memory_id))

    async def delete(self, memory_id: str) -> Deleted:
        return await self._client._send(_calls.memory("DELETE", memory_id))


class AsyncDocuments:
    def __init__(self, client: AsyncLoci):
        self._client = client

    async def upload(self, path: str | Path, *, kb: str | None = None, content_type: str | None = None,
                     metadata: dict | None = None) -> Upload:
        return (await self._client._send(_calls.upload(path, _upload_kb(kb, self._client.kb), content_type,
                                                       metadata)))[0]

    async def get(self, document_id: int) -> Document:
        return await self._client._send(_calls.document("GET", document_id))

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
        found, page = [], 1
        while True:
            body = await self._client._send(_calls.knowledge_bases(page))
            found += body["results"]
            if not body.get("next"):
                return found
            page += 1
