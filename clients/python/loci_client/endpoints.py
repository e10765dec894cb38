"""The REST API's endpoints as requests to send (`_Call`, built by the `_calls` functions), and what the
sync and async clients share around them: reading an answer (every error answer raises a LociError),
walking a paginated listing, the headers of a key."""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from loci_client.errors import error_for
from loci_client.types import (
    ChatMessage,
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
    def job(status_url: str) -> _Call:
        return _Call("GET", status_url)

    @staticmethod
    def job_by_id(job_id: str) -> _Call:
        return _Call("GET", f"/api/v1/memories/jobs/{_segment(job_id)}")

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



async def _all_pages_async(send, call_for_page):
    """Every result of a paginated listing (async)."""
    found, page = [], 1
    while True:
        body = await send(call_for_page(page))
        found += body["results"]
        if not body.get("next"):
            return found
        page += 1
