"""The EverCore-compatible memories API: post chat turns, flush, list and delete memories.

    POST   /api/v1/memories            accumulate messages (extracts the MemCells they complete)
    POST   /api/v1/memories/flush      extract everything accumulated for a session
    GET    /api/v1/memories            list, filtered, sorted and paginated
    DELETE /api/v1/memories?user_id=…  delete a user's (or one session's) memories and messages
    GET    /api/v1/memories/{id}       one memory
    PATCH  /api/v1/memories/{id}       correct its text and/or set its status (conversations.api.memory_history)
    GET    /api/v1/memories/{id}/history  every ADD / UPDATE / DELETE of it
    DELETE /api/v1/memories/{id}       delete one memory (an episode with its facts)

A request holds at most 500 turns. Where an LLM is configured, the extraction a POST triggers is queued
to a worker and the POST answers 202 with a job to poll (GET /api/v1/memories/jobs/{id}); with
"wait": true it runs in the request, as it always does with the rules alone (conversations/api/extraction_jobs.py).
"""

from django.db.models import Q
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.api import memory_history
from conversations.api import extraction_jobs as extraction
from conversations.api.extraction_jobs import WAIT_PARAMETER, WaitFieldsSerializer, wait_options
from conversations import actions
from common.pagination import StrictPageNumberPagination
from memory import curation
from memory.models import Memory
from memory.user_metadata import MetadataError, clean_user_metadata
from tenants.api.scoping import request_scope, requested_kb

MAX_MESSAGES_PER_REQUEST = 500
ORDERINGS = ("created_at", "-created_at", "occurred_at", "-occurred_at")
MEMORY_TYPES = (Memory.Kind.EPISODE, Memory.Kind.ATOMIC_FACT, Memory.Kind.AGENT_CASE, Memory.Kind.AGENT_SKILL)
# Every kind a search returns (chunks aside, which are documents' text: /documents/{id}) can be listed by name.
LISTABLE_TYPES = tuple(Memory.Kind.values)


class MessageSerializer(serializers.Serializer):
    message_id = serializers.CharField(max_length=200, required=False, allow_blank=True)
    sender_id = serializers.CharField(max_length=200, required=False, allow_blank=True)
    sender_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    role = serializers.CharField(max_length=32, required=False, allow_blank=True)
    content = serializers.CharField(trim_whitespace=True)
    timestamp = serializers.DateTimeField(help_text="ISO 8601; without a zone it is read as UTC")

    def validate(self, attrs):
        if not (attrs.get("sender_id") or attrs.get("role")):
            raise ValidationError("Each message needs 'sender_id' or 'role'.")
        return attrs


class ScopeFieldsSerializer(serializers.Serializer):
    user_id = serializers.CharField(max_length=200)
    session_id = serializers.CharField(max_length=200)
    kb = serializers.SlugField(required=False, help_text="knowledge base slug; default: 'conversations' or the first")


def _not_any_agent(value):
    if value == "*":
        raise ValidationError("'*' is reserved: a search's filters.agent_id \"*\" means every agent.")


def _user_metadata(value):
    try:
        return clean_user_metadata(value)
    except MetadataError as exc:
        raise ValidationError(str(exc)) from None


class FlushSerializer(ScopeFieldsSerializer, WaitFieldsSerializer):
    pass


class AccumulateSerializer(ScopeFieldsSerializer, WaitFieldsSerializer):
    agent_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                     validators=[_not_any_agent],
                                     help_text="the agent these turns are memories of; a search sees them only "
                                               "when it names the agent (or \"*\")")
    group_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    run_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                   help_text="one run of a task or workflow (Mem0's run_id)")
    metadata = serializers.JSONField(required=False, default=dict,
                                     help_text="up to 16 keys (letters, digits, '_'), string or number values: "
                                               "kept on every memory of these turns, filterable in search")

    def validate_metadata(self, value):
        return _user_metadata(value)
    messages = serializers.ListField(child=MessageSerializer(), min_length=1, max_length=MAX_MESSAGES_PER_REQUEST,
                                     error_messages={"min_length": "Send at least one message.",
                                                     "max_length": f"Send at most {MAX_MESSAGES_PER_REQUEST} "
                                                                   "messages per request."})


class MemorySerializer(serializers.ModelSerializer):
    memory_type = serializers.CharField(source="kind")
    metadata = serializers.JSONField(source="user_metadata", help_text="the caller's metadata")
    kb = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    parent_episode_id = serializers.UUIDField(source="parent_id", allow_null=True)
    superseded_by = serializers.UUIDField(source="superseded_by_id", allow_null=True)

    class Meta:
        model = Memory
        fields = ["id", "memory_type", "kb", "text", "topic", "user_id", "session_id", "agent_id", "group_id",
                  "run_id", "metadata", "segment_id", "occurred_at",
                  "created_at", "status", "superseded_by", "parent_episode_id", "source_message_ids",
                  "document_id", "extraction_mode"]
        read_only_fields = fields


class ExtractionCountsSerializer(serializers.Serializer):
    """What an extraction wrote (present when status is "extracted")."""

    segments = serializers.IntegerField(required=False, help_text="MemCells cut from the messages")
    episodes = serializers.IntegerField(required=False)
    facts = serializers.IntegerField(required=False)
    merged_duplicates = serializers.IntegerField(required=False, help_text="facts merged into an existing one")
    superseded = serializers.IntegerField(required=False)
    job_id = serializers.UUIDField(required=False, help_text="the extraction job, where one ran (wait=true)")


class AccumulateResultSerializer(ExtractionCountsSerializer):
    status = serializers.ChoiceField(["accumulated", "extracted"])
    message_count = serializers.IntegerField(help_text="messages waiting (accumulated) or extracted")
    forced = serializers.BooleanField(required=False, help_text="extracted because the session's buffer was full")
    kb = serializers.SlugField()


class FlushResultSerializer(ExtractionCountsSerializer):
    status = serializers.ChoiceField(["extracted", "no_extraction"])


class DeleteResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(["deleted"])
    deleted = serializers.IntegerField(help_text="memories deleted (an episode's facts included)")


class MemoryPagination(StrictPageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 100


def _kb(scope, slug):
    try:
        return actions.conversation_kb(scope, slug)
    except actions.ConversationError as exc:
        raise ValidationError({"kb": str(exc)})


def _kb_ids(scope, slug: str | None) -> list[int]:
    """Every KB of the scope, or the named one (a 400 for an unknown name)."""
    if not slug:
        return sorted(scope.kb_ids)
    return [requested_kb(scope, slug).pk]


def _datetime(params, name):
    value = params.get(name)
    if not value:
        return None
    try:
        return serializers.DateTimeField().to_internal_value(value)
    except ValidationError:
        try:
            return serializers.DateTimeField().to_internal_value(f"{value}T00:00:00")
        except ValidationError:
            raise ValidationError({name: f"'{value}' is not an ISO 8601 date or date-time."}) from None


def listed_memories(scope, params):
    """The memories GET /api/v1/memories lists for these query parameters (the MCP list_memories tool too)."""
    qs = Memory.objects.in_scope(scope).filter(kb_id__in=_kb_ids(scope, params.get("kb"))).select_related("kb")
    memory_type = params.get("memory_type")
    if memory_type is not None:  # present but empty is no type either (the schema's enum)
        if memory_type not in LISTABLE_TYPES:
            raise ValidationError({"memory_type": f"Use one of: {', '.join(LISTABLE_TYPES)}."})
        qs = qs.filter(kind=memory_type)
    else:
        qs = qs.filter(kind__in=MEMORY_TYPES)
    wanted = params.get("status", "active")
    if wanted != "all":
        if wanted not in Memory.Status.values:
            raise ValidationError({"status": f"Use one of: {', '.join(Memory.Status.values)}, all."})
        qs = qs.filter(status=wanted)
    for key in ("user_id", "session_id", "agent_id", "group_id", "run_id"):
        if params.get(key):
            qs = qs.filter(**{key: params[key]})
    start, end = _datetime(params, "start"), _datetime(params, "end")
    if start:  # a memory with no known time is placed by when it was recorded
        qs = qs.filter(Q(occurred_at__gte=start) | Q(occurred_at__isnull=True, created_at__gte=start))
    if end:
        qs = qs.filter(Q(occurred_at__lt=end) | Q(occurred_at__isnull=True, created_at__lt=end))
    ordering = params.get("ordering", "-created_at")
    if ordering not in ORDERINGS:
        raise ValidationError({"ordering": f"Use one of: {', '.join(ORDERINGS)}."})
    return qs.order_by(ordering, "ordinal", "id")


class MemoriesView(APIView):
    """Post chat turns, list memories, delete a user's memories."""

    pagination_class = MemoryPagination  # what GET answers; also how the schema knows it is paginated

    @extend_schema(request=AccumulateSerializer, parameters=[WAIT_PARAMETER],
                   responses={200: AccumulateResultSerializer, **extraction.QUEUED_RESPONSES})
    def post(self, request):
        scope = request_scope(request, write=True)
        body = AccumulateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        wait, timeout = wait_options(request, data)
        kb = _kb(scope, data.get("kb"))
        fields = {key: data[key] for key in ("user_id", "session_id", "messages", "agent_id", "group_id", "run_id",
                                             "metadata")}
        code, body = extraction.accumulate(scope, kb, fields, wait=wait, timeout=timeout)
        return Response(body, status=code)

    @extend_schema(
        parameters=[
            OpenApiParameter("memory_type", enum=list(LISTABLE_TYPES),
                             description="without it: episodes and atomic facts"),
            OpenApiParameter("user_id"), OpenApiParameter("session_id"), OpenApiParameter("kb"),
            OpenApiParameter("agent_id"), OpenApiParameter("group_id"), OpenApiParameter("run_id"),
            OpenApiParameter("status", enum=["active", "superseded", "disabled", "all"]),
            OpenApiParameter("start", description="ISO date-time: occurred_at (else created_at) at or after"),
            OpenApiParameter("end", description="ISO date-time: occurred_at (else created_at) before"),
            OpenApiParameter("ordering", enum=list(ORDERINGS)),
            OpenApiParameter("page", int), OpenApiParameter("page_size", int, description="at most 100"),
        ],
        responses=MemorySerializer(many=True),
    )
    def get(self, request):
        qs = listed_memories(request_scope(request), request.query_params)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(MemorySerializer(page, many=True).data)

    @extend_schema(operation_id="memories_delete_scope", responses={200: DeleteResultSerializer},
                   parameters=[OpenApiParameter("user_id", required=True), OpenApiParameter("session_id"),
                               OpenApiParameter("kb")])
    def delete(self, request):
        scope = request_scope(request, write=True)
        params = request.query_params
        if not params.get("user_id"):
            raise ValidationError({"user_id": "Name the user whose memories to delete (and optionally session_id)."})
        deleted = curation.delete_memories_in_scope(scope, _kb_ids(scope, params.get("kb")), user_id=params["user_id"],
                                                   session_id=params.get("session_id") or None)
        return Response({"status": "deleted", "deleted": deleted})


class MemoryFlushView(APIView):
    """Segment and extract everything accumulated for one session."""

    @extend_schema(request=FlushSerializer, parameters=[WAIT_PARAMETER],
                   responses={200: FlushResultSerializer, **extraction.QUEUED_RESPONSES})
    def post(self, request):
        scope = request_scope(request, write=True)
        body = FlushSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        wait, timeout = wait_options(request, data)
        kb = _kb(scope, data.get("kb"))
        code, body = extraction.flush(scope, kb, user_id=data["user_id"], session_id=data["session_id"], wait=wait,
                                      timeout=timeout)
        return Response(body, status=code)


# Routes match ids by regex (so both /x and /x/ resolve); the schema states their type.
MEMORY_ID = OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)


@extend_schema(parameters=[MEMORY_ID])
class MemoryDetailView(APIView):
    """One memory of the caller's knowledge bases."""

    def _memory(self, scope, pk):
        return get_object_or_404(Memory.objects.in_scope(scope).select_related("kb"), pk=pk)

    @extend_schema(responses=MemorySerializer)
    def get(self, request, pk):
        return Response(MemorySerializer(self._memory(request_scope(request), pk)).data)

    @extend_schema(request=memory_history.MemoryPatchSerializer, responses=MemorySerializer)
    def patch(self, request, pk):
        return memory_history.patch(self, request, pk, MemorySerializer)

    @extend_schema(operation_id="memory_delete", responses={200: DeleteResultSerializer})
    def delete(self, request, pk):
        scope = request_scope(request, write=True)
        deleted = curation.delete_memory(scope, self._memory(scope, pk))
        return Response({"status": "deleted", "deleted": deleted}, status=status.HTTP_200_OK)

