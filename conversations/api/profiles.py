"""GET /api/v1/profiles/{user_id}: what a conversation user's memories say about each person in them."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.api.memories import _kb_ids
from memory.models import Memory
from retrieval.api.serializers import ProfileItemSerializer
from retrieval.search.memory_kinds import profile_item
from tenants.api.scoping import request_scope

MAX_ITEMS = 500


class ProfileSerializer(serializers.Serializer):
    user_id = serializers.CharField()
    subjects = serializers.ListField(child=serializers.CharField(), help_text="the people its items are about")
    items = ProfileItemSerializer(many=True, help_text="by subject, category, then newest first")


class ProfileView(APIView):
    """One conversation user's profile items (active ones; with status=all the superseded ones too)."""

    @extend_schema(responses=ProfileSerializer, parameters=[
        OpenApiParameter("kb"), OpenApiParameter("subject", description="only items about this person"),
        OpenApiParameter("status", enum=["active", "all"])])
    def get(self, request, user_id):
        return Response(user_profile(request_scope(request), user_id, request.query_params))


def user_profile(scope, user_id: str, params) -> dict:
    """What GET /api/v1/profiles/{user_id} answers (the MCP get_profile tool too); NotFound when empty."""
    qs = Memory.objects.filter(tenant=scope.tenant, kb_id__in=_kb_ids(scope, params.get("kb")),
                               kind=Memory.Kind.PROFILE, user_id=user_id)
    wanted = params.get("status", "active")
    if wanted not in ("active", "all"):
        raise ValidationError({"status": "Use active or all."})
    if wanted == "active":
        qs = qs.filter(status=Memory.Status.ACTIVE)
    if params.get("subject"):
        qs = qs.filter(metadata__subject=params["subject"])
    items = [profile_item(m) for m in qs.order_by("-occurred_at", "id")[:MAX_ITEMS]]
    if not items:
        raise NotFound(f"No profile for user '{user_id}'.")
    items.sort(key=lambda i: (i["subject"], i["category"]))
    return {"user_id": user_id, "subjects": sorted({i["subject"] for i in items}), "items": items}
