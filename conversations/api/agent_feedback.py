"""POST /api/v1/memories/{id}/feedback: how reusing an agent case or skill went (moves its quality or maturity)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.skills import FEEDBACK_OUTCOMES, FeedbackError, record_feedback
from memory.models import Memory
from tenants.api.scoping import request_scope


class FeedbackSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(FEEDBACK_OUTCOMES, help_text="how reusing the case or skill went")
    note = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")


class FeedbackResultSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    memory_type = serializers.ChoiceField(["agent_case", "agent_skill"])
    text = serializers.CharField()
    quality = serializers.FloatField(required=False, help_text="a case's quality now")
    outcome_label = serializers.CharField(required=False)
    maturity = serializers.FloatField(required=False, help_text="the skill's maturity now (a case: its skill's)")
    skill_id = serializers.UUIDField(required=False, allow_null=True)


def feedback_result(memory: Memory) -> dict:
    out = {"id": str(memory.pk), "memory_type": memory.kind, "text": memory.text}
    if memory.kind == Memory.Kind.AGENT_CASE:
        out.update(quality=memory.metadata.get("quality"), outcome_label=memory.metadata.get("outcome_label"))
        skill = _skill_of(memory)
        out["skill_id"] = str(skill.pk) if skill else None
        if skill:
            out["maturity"] = skill.metadata.get("maturity")
    else:
        out["maturity"] = memory.metadata.get("maturity")
    return out


def _skill_of(case: Memory) -> Memory | None:
    for skill in Memory.objects.filter(kind=Memory.Kind.AGENT_SKILL, tenant_id=case.tenant_id, kb_id=case.kb_id,
                                       user_id=case.user_id, agent_id=case.agent_id, status=Memory.Status.ACTIVE):
        if str(case.pk) in skill.metadata.get("case_ids", []):
            return skill
    return None


def give_feedback(scope, memory: Memory, data: dict) -> dict:
    """Record checked feedback (FeedbackSerializer's data) on a memory; its result. A 400 for a memory
    that takes none. The REST view and the MCP tool share it."""
    try:
        memory = record_feedback(memory, data["outcome"], note=data.get("note", ""), actor=scope.actor)
    except FeedbackError as exc:
        raise ValidationError({"outcome": str(exc)}) from None
    return feedback_result(Memory.objects.get(pk=memory.pk))


class MemoryFeedbackView(APIView):
    @extend_schema(request=FeedbackSerializer, responses={200: FeedbackResultSerializer})
    def post(self, request, pk):
        scope = request_scope(request, write=True)
        memory = get_object_or_404(Memory.objects.in_scope(scope), pk=pk)
        body = FeedbackSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(give_feedback(scope, memory, body.validated_data))
