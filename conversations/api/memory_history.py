"""PATCH /api/v1/memories/{id} (text, status) and GET /api/v1/memories/{id}/history."""

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.actions import ConversationError
from conversations.memory_edits import EDITABLE_STATUSES, history_entry, memory_history, patch_memory
from memory.models import MemoryHistory
from tenants.api.scoping import request_scope


class MemoryPatchSerializer(serializers.Serializer):
    text = serializers.CharField(required=False, trim_whitespace=True, allow_blank=True,
                                 help_text="the corrected text (re-embedded and re-indexed on commit)")
    status = serializers.ChoiceField(list(EDITABLE_STATUSES), required=False,
                                     help_text="disabled memories leave the indexes; active ones come back")


class MemoryStateSerializer(serializers.Serializer):
    text = serializers.CharField(allow_blank=True)
    status = serializers.CharField(allow_blank=True)


class HistoryEntrySerializer(serializers.Serializer):
    """One change: ADD (before empty), UPDATE, or DELETE (after empty)."""

    id = serializers.IntegerField()
    memory_id = serializers.UUIDField()
    event = serializers.ChoiceField(MemoryHistory.Event.values)
    actor = serializers.CharField(allow_blank=True, help_text="key:<id>, admin:<user>, a console user, or extraction")
    reason = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    before = MemoryStateSerializer(allow_null=True)
    after = MemoryStateSerializer(allow_null=True)


class HistorySerializer(serializers.Serializer):
    memory_id = serializers.UUIDField()
    history = HistoryEntrySerializer(many=True, help_text="oldest first")


@extend_schema(parameters=[OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)])
class MemoryHistoryView(APIView):
    """Every ADD, UPDATE and DELETE of one memory, kept after the memory itself is deleted."""

    @extend_schema(responses=HistorySerializer)
    def get(self, request, pk):
        rows = memory_history(request_scope(request), pk)
        if not rows:
            raise Http404("No history for this memory.")
        return Response({"memory_id": str(pk), "history": [history_entry(r) for r in rows]})


def patch(view, request, pk, serializer_class):
    """The body of MemoryDetailView.patch: validate, patch, answer the memory as GET shows it."""
    scope = request_scope(request, write=True)
    body = MemoryPatchSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    try:
        memory = patch_memory(scope, view._memory(scope, pk), **body.validated_data)
    except ConversationError as exc:
        raise ValidationError({"memory": str(exc)})
    return Response(serializer_class(memory).data)
