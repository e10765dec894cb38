"""`Loci` (sync) and `AsyncLoci` (async): the REST API, one method per endpoint, on httpx.

Each endpoint is written once, as a `_Call` (method, path, body) built by the `_calls` functions
(endpoints.py); the sync and async clients and their resources (resources.py, async_resources.py) differ
only in how they send it. Every error answer raises a LociError.
"""

from __future__ import annotations  # methods named `list` must not shadow the annotations after them

import httpx

from loci_client.async_resources import (
    AsyncDocuments,
    AsyncEntities,
    AsyncKnowledgeBases,
    AsyncMemories,
    AsyncProfiles,
    AsyncTenants,
    AsyncWebhooks,
)
from loci_client.endpoints import FINISHED, _Call, _calls, _headers, _records, _result
from loci_client.resources import Documents, Entities, KnowledgeBases, Memories, Profiles, Tenants, Webhooks
from loci_client.types import SearchResponse

# Names this module held before its resources moved out; `from loci_client.client import Memories` keeps working.
__all__ = ["FINISHED", "AsyncDocuments", "AsyncEntities", "AsyncKnowledgeBases", "AsyncLoci", "AsyncMemories",
           "AsyncProfiles", "AsyncTenants", "AsyncWebhooks", "Documents", "Entities", "KnowledgeBases", "Loci",
           "Memories", "Profiles", "Tenants", "Webhooks"]


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
