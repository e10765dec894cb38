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
from urllib.parse import quote

import httpx

from loci_client.errors import error_for
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
    raw: bool = False  # the answer's bytes (a file, JSON Lines), not parsed JSON


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
    def memory(method: str, memory_id: str, body: dict | None = None) -> _Call:
        return _Call(method, f"/api/v1/memories/{_segment(memory_id)}", body)

    @staticmethod
    def memory_history(memory_id: str) -> _Call:
        return _Call("GET", f"/api/v1/memories/{_segment(memory_id)}/history")

    @staticmethod
    def feedback(memory_id: str, outcome: str, note: str | None) -> _Call:
        return _Call("POST", f"/api/v1/memories/{_segment(memory_id)}/feedback",
                     _without_none(outcome=outcome, note=note))

    @staticmethod
    def delete_user(user_id, session_id, kb) -> _Call:
        return _Call("DELETE", "/api/v1/memories", params=_without_none(user_id=user_id, session_id=session_id, kb=kb))

    @staticmethod
    def profile(user_id, **params) -> _Call:
        return _Call("GET", f"/api/v1/profiles/{_segment(user_id)}", params=_without_none(**params))

    @staticmethod
    def entities(**params) -> _Call:
        return _Call("GET", "/api/v1/entities", params=_without_none(**params))

    @staticmethod
    def entity(entity_id: int) -> _Call:
        return _Call("GET", f"/api/v1/entities/{int(entity_id)}")

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
    def documents(**params) -> _Call:
        return _Call("GET", "/api/v1/documents", params=_without_none(**params))

    @staticmethod
    def document(method: str, document_id: int, action: str = "", params: dict | None = None) -> _Call:
        return _Call(method, f"/api/v1/documents/{int(document_id)}" + (f"/{action}" if action else ""),
                     params=params or {}, raw=action == "original")

    @staticmethod
    def knowledge_bases(page: int) -> _Call:
        return _Call("GET", "/api/v1/knowledge-bases", params={"page": page})

    @staticmethod
    def knowledge_base(method: str, slug: str = "", body: dict | None = None) -> _Call:
        return _Call(method, "/api/v1/knowledge-bases" + (f"/{_segment(slug)}" if slug else ""), body)

    @staticmethod
    def webhook(method: str, webhook_id: int | None = None, action: str = "", body: dict | None = None,
                params: dict | None = None) -> _Call:
        path = "/api/v1/webhooks" + (f"/{int(webhook_id)}" if webhook_id is not None else "")
        return _Call(method, path + (f"/{action}" if action else ""), body, params=params or {})

    @staticmethod
    def export(kb, user_id, originals) -> _Call:
        return _Call("GET", "/api/v1/export", params=_without_none(kb=kb, user_id=user_id,
                                                                  originals="1" if originals else None), raw=True)

    @staticmethod
    def tenants() -> _Call:
        return _Call("GET", "/api/v1/tenants")


def _segment(value) -> str:
    # An id placed in a path: quoted, so a user id such as "a/b" or "../x" stays one segment.
    return quote(str(value), safe="")


def _result(response: httpx.Response, raw: bool = False):
    if raw and response.status_code < 400:
        return response.content
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = response.text
    if response.status_code >= 400:
        raise error_for(response.status_code, body, response.headers.get("Retry-After"))
    return body


def _records(content: bytes) -> list[dict]:
    return [json.loads(line) for line in content.decode("utf-8").splitlines() if line.strip()]


def _all_pages(send, call_for_page):
    """Every result of a paginated listing (sync)."""
    found, page = [], 1
    while True:
        body = send(call_for_page(page))
        found += body["results"]
        if not body.get("next"):
            return found
        page += 1


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
        self.profiles = Profiles(self)
        self.entities = Entities(self)
        self.documents = Documents(self)
        self.knowledge_bases = KnowledgeBases(self)
        self.webhooks = Webhooks(self)
        self.tenants = Tenants(self)

    def _send(self, call: _Call):
        return _result(self._http.request(call.method, call.path, json=call.json, params=call.params,
                                          files=call.files, data=call.data), call.raw)

    def search(self, query: str, *, method: str = "hybrid", top_k: int = 10, memory_types: list[str] | None = None,
               filters: dict | None = None, expand_context: bool | None = None, neighbours: int | None = None,
               rerank: bool | None = None) -> SearchResponse:
        """Search the memories (and chunks, with memory_types=["chunk"]) the key may read; items keep their sources."""
        return self._send(_calls.search(query, method, top_k, memory_types, filters, expand_context, neighbours,
                                        rerank))

    def export(self, *, kb: str | None = None, user_id: str | None = None, originals: bool = False) -> list[dict]:
        """What the key may read (one KB, one user) as export records: the lines `manage.py import` reads."""
        return _records(self._send(_calls.export(kb, user_id, originals)))

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
        self.profiles = AsyncProfiles(self)
        self.entities = AsyncEntities(self)
        self.documents = AsyncDocuments(self)
        self.knowledge_bases = AsyncKnowledgeBases(self)
        self.webhooks = AsyncWebhooks(self)
        self.tenants = AsyncTenants(self)

    async def _send(self, call: _Call):
        return _result(await self._http.request(call.method, call.path, json=call.json, params=call.params,
                                                files=call.files, data=call.data), call.raw)

    async def search(self, query: str, *, method: str = "hybrid", top_k: int = 10,
                     memory_types: list[str] | None = None, filters: dict | None = None,
                     expand_context: bool | None = None, neighbours: int | None = None,
                     rerank: bool | None = None) -> SearchResponse:
        return await self._send(_calls.search(query, method, top_k, memory_types, filters, expand_context,
                                              neighbours, rerank))

    async def export(self, *, kb: str | None = None, user_id: str | None = None,
                     originals: bool = False) -> list[dict]:
        return _records(await self._send(_calls.export(kb, user_id, originals)))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncLoci":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


async def _all_pages_async(send, call_for_page):
    found, page = [], 1
    while True:
        body = await send(call_for_page(page))
        found += body["results"]
        if not body.get("next"):
            return found
        page += 1


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
