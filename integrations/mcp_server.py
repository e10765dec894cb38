"""Loci as an MCP server (the official `mcp` SDK): the REST API's actions and search, as tools for agents.

Every tool resolves the caller's API key to a permission scope exactly as the REST API does
(`tenants.access.permitted_scope`), then calls the same domain function the REST view calls, so a
key limited to one knowledge base sees one knowledge base here too. Where the key comes from is the
transport's business (`build_server(key_for)`): the `Authorization` header of each HTTP request
(integrations.mcp_http), or the one key `manage.py mcp` was started with (stdio).

The SDK runs tools on an event loop; the ORM is synchronous, so each tool does its database work in
one `sync_to_async` call (thread-sensitive: one thread, one connection, as Django's ASGI handler does).
"""

import base64
import binascii
import json
import uuid
from collections.abc import Callable
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.files.base import ContentFile
from django.db import close_old_connections, transaction
from django.db.models import Count, Q
from django.http import Http404
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.utils.encoders import JSONEncoder
from typing_extensions import NotRequired, TypedDict  # pydantic reads TypedDicts from here before Python 3.12

from ingest.actions import ingest_document
from conversations.api import extraction_jobs as extraction
from conversations.api.agent_feedback import FeedbackSerializer, give_feedback
from conversations.api.memories import (AccumulateSerializer, MemoryPagination, MemorySerializer, ScopeFieldsSerializer,
                                  listed_memories)
from conversations.api.profiles import user_profile
from ingest.api.serializers import DocumentSerializer
from conversations import actions as conversation
from conversations.extraction_jobs import describe as describe_job
from conversations.memory_edits import history_entry
from conversations.memory_edits import memory_history as history_rows  # a tool below is named memory_history
from ingest.upload_limits import limit_megabytes
from memory import curation
from memory.models import Document, Memory
from retrieval.request import SearchError, parse_search_request
from retrieval.search import EngineError, search
from tenants import rate_limits as allowances
from tenants.access import Scope, permitted_scope
from tenants.api.serializers import KnowledgeBaseSerializer
from tenants.models import ApiKey

INSTRUCTIONS = (
    "Loci stores what conversations and documents say as memories (episodes and atomic facts) and "
    "searches them. Post chat turns with add_messages, then flush to extract the rest of a session; "
    "search returns facts, episodes and chunks, each with the sources it came from."
)

KeyFor = Callable[[Context], str | None]


class ChatMessage(TypedDict):
    """One chat turn, as POST /api/v1/memories takes it."""

    content: str
    timestamp: str  # ISO 8601; without a zone it is read as UTC
    role: NotRequired[str]
    sender_id: NotRequired[str]
    sender_name: NotRequired[str]
    message_id: NotRequired[str]


class SearchFilters(TypedDict, total=False):
    """Narrow a search; the caller's permitted knowledge bases always apply."""

    kb: list[str]
    document_id: list[int]
    user_id: str
    session_id: str
    agent_id: str  # this agent's memories; "*": every agent's; absent: memories of no agent only
    group_id: str
    run_id: str
    metadata: dict[str, Any]  # {key: value | [values] | {"gte": n, "lt": n, ...}}
    participant: str  # a group chat's speaker: their personal episodes and facts rank first


def build_server(key_for: KeyFor) -> MCPServer:
    """An MCP server whose tools act as the API key `key_for(ctx)` names."""
    server = MCPServer("loci", instructions=INSTRUCTIONS)

    async def act(ctx: Context, work: Callable[[Scope], Any], *, write: bool = False, searching: bool = False) -> dict:
        return await sync_to_async(_as_caller, thread_sensitive=True)(key_for(ctx), write, work, searching)

    @server.tool()
    async def add_messages(user_id: str, session_id: str, messages: list[ChatMessage], ctx: Context,
                           kb: str | None = None, agent_id: str = "", group_id: str = "", run_id: str = "",
                           metadata: dict[str, Any] | None = None, wait: bool = True) -> dict[str, Any]:
        """Store chat turns of one session and extract the MemCells they complete into memories.

        agent_id, group_id, run_id scope the memories (a search sees an agent's only when it names the
        agent); metadata (up to 16 string or number values) is kept on each memory and filterable.
        wait (default true, so the answer says what was extracted, as it always did): extract in this
        call. wait=false: where an LLM is configured the extraction is queued to a worker and the answer
        is {"status": "queued", "job_id"}; extraction_job(job_id) tells when it is done."""
        body = {"user_id": user_id, "session_id": session_id, "messages": messages, "agent_id": agent_id,
                "group_id": group_id, "run_id": run_id, "metadata": metadata or {}, **({"kb": kb} if kb else {})}

        def work(scope):
            data = _valid(AccumulateSerializer, body)
            target = conversation.conversation_kb(scope, data.get("kb"))
            fields = {key: data[key] for key in ("user_id", "session_id", "messages", "agent_id", "group_id",
                                                 "run_id", "metadata")}
            return extraction.accumulate(scope, target, fields, wait=wait, timeout=None)[1]

        return await act(ctx, work, write=True)

    @server.tool()
    async def flush(user_id: str, session_id: str, ctx: Context, kb: str | None = None,
                    wait: bool = True) -> dict[str, Any]:
        """Extract everything accumulated for a session, the unfinished tail included; wait as in add_messages."""
        body = {"user_id": user_id, "session_id": session_id, **({"kb": kb} if kb else {})}

        def work(scope):
            data = _valid(ScopeFieldsSerializer, body)
            target = conversation.conversation_kb(scope, data.get("kb"))
            answer = extraction.flush(scope, target, user_id=data["user_id"], session_id=data["session_id"],
                                      wait=wait, timeout=None)[1]
            return {**answer, "kb": target.slug}

        return await act(ctx, work, write=True)

    @server.tool()
    async def extraction_job(job_id: str, ctx: Context) -> dict[str, Any]:
        """A queued extraction (add_messages or flush with wait=false): pending, running, done with its
        result, or failed with its reason."""
        def work(scope):
            try:
                pk = uuid.UUID(str(job_id))
            except ValueError:
                raise ToolError(f"'{job_id}' is not a job id (a UUID).") from None
            return describe_job(extraction.job_in_scope(scope, pk))

        return await act(ctx, work)

    @server.tool(name="search")
    async def search_memories(query: str, ctx: Context,
                              method: Literal["keyword", "vector", "hybrid", "agentic", "paths", "navigate"] = "hybrid",
                              top_k: int = 10, memory_types: list[str] | None = None,
                              filters: SearchFilters | None = None, expand_context: bool = False,
                              neighbours: int = 0, rerank: bool | None = None) -> dict[str, Any]:
        """Search the memories (and document chunks, with memory_types ["chunk"]) the key may read.

        memory_types: episode, atomic_fact (the default pair), chunk, profile, foresight.
        top_k: 1 to 100, or -1 for everything above the similarity floor. Every item lists its sources.
        """
        body = {"query": query, "method": method, "top_k": top_k, "memory_types": memory_types,
                "filters": filters or {}, "expand_context": expand_context, "neighbours": neighbours,
                "rerank": rerank}
        return await act(ctx, lambda scope: search(scope, parse_search_request(body)), searching=True)

    @server.tool()
    async def get_memory(memory_id: str, ctx: Context) -> dict[str, Any]:
        """One memory (an episode or an atomic fact) by id."""
        return await act(ctx, lambda scope: MemorySerializer(_memory(scope, memory_id)).data)

    @server.tool()
    async def list_memories(ctx: Context, memory_type: str | None = None, user_id: str | None = None,
                            session_id: str | None = None, kb: str | None = None, status: str = "active",
                            start: str | None = None, end: str | None = None, ordering: str = "-created_at",
                            page: int = 1, page_size: int = 50) -> dict[str, Any]:
        """List memories newest first, as GET /api/v1/memories does (the same filters).

        memory_type: episode, atomic_fact, profile or foresight (without it: episodes and atomic facts).
        status: active, superseded, disabled or all. start/end: ISO dates. page_size: at most 100.
        """
        params = {k: v for k, v in {"memory_type": memory_type, "user_id": user_id, "session_id": session_id,
                                    "kb": kb, "status": status, "start": start, "end": end,
                                    "ordering": ordering}.items() if v}

        def work(scope):
            qs = listed_memories(scope, params)
            size = max(1, min(int(page_size), MemoryPagination.max_page_size))
            first = (max(1, int(page)) - 1) * size
            total = qs.count()
            return {"count": total, "page": max(1, int(page)), "page_size": size,
                    "results": MemorySerializer(qs[first:first + size], many=True).data}

        return await act(ctx, work)

    @server.tool()
    async def memory_history(memory_id: str, ctx: Context) -> dict[str, Any]:
        """Every change of one memory, oldest first: ADD, UPDATE (before and after) and DELETE, with who made it.

        Kept after the memory is deleted, so it also says what a deleted memory said."""
        def work(scope):
            try:
                pk = uuid.UUID(str(memory_id))
            except ValueError:
                raise ToolError(f"'{memory_id}' is not a memory id (a UUID).") from None
            rows = history_rows(scope, pk)
            if not rows:
                raise ToolError(f"No history for memory {pk} in the knowledge bases this key may read.")
            return {"memory_id": str(pk), "history": [history_entry(row) for row in rows]}

        return await act(ctx, work)

    @server.tool()
    async def get_profile(user_id: str, ctx: Context, kb: str | None = None, subject: str | None = None,
                          status: Literal["active", "all"] = "active") -> dict[str, Any]:
        """What a conversation user's memories say about each person in them (traits, preferences, facts).

        subject: only items about this person. status all: superseded items too."""
        params = {k: v for k, v in {"kb": kb, "subject": subject, "status": status}.items() if v}
        return await act(ctx, lambda scope: user_profile(scope, user_id, params))

    @server.tool()
    async def update_memory(memory_id: str, text: str, ctx: Context) -> dict[str, Any]:
        """Correct a memory's text; the old text stays in its history and search sees the new one."""
        def work(scope):
            return MemorySerializer(conversation.edit_memory(scope, _memory(scope, memory_id), text)).data

        return await act(ctx, work, write=True)

    @server.tool()
    async def record_feedback(memory_id: str, outcome: Literal["success", "failure"], ctx: Context,
                              note: str = "") -> dict[str, Any]:
        """Say how reusing an agent case or skill went: a success raises a skill's maturity (a case's
        quality), a failure lowers it; each change is in the memory's history."""

        def work(scope):
            return give_feedback(scope, _memory(scope, memory_id),
                                 _valid(FeedbackSerializer, {"outcome": outcome, "note": note}))

        return await act(ctx, work, write=True)

    @server.tool()
    async def delete_memory(memory_id: str, ctx: Context) -> dict[str, Any]:
        """Delete a memory (an episode takes its atomic facts along) from the database and the indexes."""
        def work(scope):
            return {"status": "deleted", "deleted": curation.delete_memory(scope, _memory(scope, memory_id))}

        return await act(ctx, work, write=True)

    @server.tool()
    async def upload_document(kb: str, filename: str, ctx: Context, text: str | None = None,
                              content_base64: str | None = None, content_type: str = "") -> dict[str, Any]:
        """Add a document to a knowledge base: `text` for plain text, or `content_base64` for any file.

        It is parsed, chunked and indexed in the background; read its progress with document_status.
        An identical file already in the knowledge base is reported with duplicate=true.
        """
        content = _content(text, content_base64)

        def work(scope):
            target = scope.knowledge_bases().filter(slug=kb).first()
            if target is None:
                raise ToolError(f"Unknown knowledge base '{kb}'.")
            with transaction.atomic():
                upload = ingest_document(scope, target, ContentFile(content), filename,
                                         content_type=content_type or ("text/plain" if text is not None else ""))
            return {"document": DocumentSerializer(upload.document).data, "duplicate": upload.duplicate}

        return await act(ctx, work, write=True)

    @server.tool()
    async def document_status(document_id: int, ctx: Context) -> dict[str, Any]:
        """A document's processing status (queued, parsing, ..., ready or failed, with the reason)."""
        def work(scope):
            document = Document.objects.in_scope(scope).select_related("kb").filter(pk=document_id).first()
            if document is None:
                raise ToolError(f"No document {document_id} in the knowledge bases this key may read.")
            return DocumentSerializer(document).data

        return await act(ctx, work)

    @server.tool()
    async def list_knowledge_bases(ctx: Context) -> dict[str, Any]:
        """The knowledge bases this key may read, with their document and memory counts."""
        def work(scope):
            kbs = scope.knowledge_bases().annotate(
                document_count=Count("documents", distinct=True),
                memory_count=Count("memories", filter=Q(memories__status="active"), distinct=True),
            ).order_by("slug")
            return {"tenant": scope.tenant.slug, "knowledge_bases": KnowledgeBaseSerializer(kbs, many=True).data}

        return await act(ctx, work)

    return server


def _as_caller(token: str | None, write: bool, work: Callable[[Scope], Any], searching: bool = False) -> dict:
    """Resolve the key to its scope and run `work` in it; what the caller must fix becomes a tool error.

    The key spends the same allowances as on the REST API (LOCI_RATE_LIMIT_USER per call, and for a
    search LOCI_RATE_LIMIT_SEARCH and LOCI_SEARCH_CPU_PER_MINUTE), counted in the same cache, so an
    agent cannot go round them by speaking MCP instead of HTTP."""
    close_old_connections()  # as a request does: a long-lived server must not reuse a dead connection
    try:
        key = _key(token)
        caller = allowances.Caller(key)
        allowances.check(caller, searching=searching)
        result = work(permitted_scope(key, write=write))
        if searching and isinstance(result, dict):
            allowances.charge_search_cpu(caller, result.get("query", {}).get("cpu_ms", 0) / 1000)
        # Exactly the JSON the REST API renders (dates, UUIDs), not a second notion of it.
        return json.loads(json.dumps(result, cls=JSONEncoder))
    except (SearchError, conversation.ConversationError, PermissionDenied, Http404) as exc:
        raise ToolError(str(exc) or type(exc).__name__) from None
    except EngineError as exc:
        raise ToolError(f"{exc} (engine: {exc.engine}); try again shortly.") from None
    except ValidationError as exc:
        raise ToolError(f"Invalid arguments: {json.dumps(exc.detail, cls=JSONEncoder)}") from None
    except APIException as exc:  # a REST function's NotFound and the like: its message, as REST says it
        raise ToolError(str(exc.detail)) from None
    finally:
        close_old_connections()


def _key(token: str | None) -> ApiKey:
    if not token:
        raise PermissionDenied("No API key: send 'Authorization: Bearer <key>' (HTTP) or set LOCI_API_KEY (stdio).")
    key = ApiKey.verify(token)
    if key is None:
        raise PermissionDenied("Invalid or revoked API key.")
    key.touch()
    return key


def _valid(serializer_class, data: dict) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _memory(scope: Scope, memory_id: str) -> Memory:
    try:
        pk = uuid.UUID(str(memory_id))
    except ValueError:
        raise ToolError(f"'{memory_id}' is not a memory id (a UUID).") from None
    memory = Memory.objects.in_scope(scope).select_related("kb").filter(pk=pk).first()
    if memory is None:
        raise ToolError(f"No memory {pk} in the knowledge bases this key may read.")
    return memory


def _content(text: str | None, content_base64: str | None) -> bytes:
    if (text is None) == (content_base64 is None):
        raise ToolError("Give the document as either 'text' or 'content_base64' (exactly one).")
    if text is not None:
        content = text.encode("utf-8")
    else:
        try:
            content = base64.b64decode(content_base64, validate=True)
        except (binascii.Error, ValueError):
            raise ToolError("'content_base64' is not valid base64.") from None
    limit = settings.LOCI_MAX_UPLOAD_BYTES
    if len(content) > limit:
        raise ToolError(f"The file is larger than the limit; the limit is {limit_megabytes(limit)} per file "
                        "(LOCI_MAX_UPLOAD_MB).")
    return content
