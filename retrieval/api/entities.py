"""The entity API: who and what the memories a caller may read name.

    GET /api/v1/entities?q=&type=&kb=   entities named in the readable KBs, most mentioned first
    GET /api/v1/entities/{id}           one entity: aliases, mentions, the memories and chunks naming it

An entity belongs to its tenant; it is shown only through mentions in memories the caller may
read (its KBs, active), and every count is of those mentions alone.
"""

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from entities.models import Entity
from entities.resolution import entity_key
from entities.visibility import readable_mentions, visible_entities
from memory.models import Chunk
from retrieval.api.serializers import SourceSerializer
from retrieval.results import _chunk_source, memory_sources
from common.pagination import StrictPageNumberPagination
from tenants.api.scoping import request_scope

MAX_MEMORIES = 100  # per entity detail; the mention count says how many there are in all
MAX_QUERY = 200


class EntitySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.ChoiceField(Entity.Type.choices)
    value = serializers.CharField(help_text="dates: the ISO date; amounts: '<number> <unit>'; else empty")
    mention_count = serializers.IntegerField(help_text="memories you may read that name it")
    modes = serializers.ListField(child=serializers.ChoiceField(["deterministic", "llm"]),
                                  help_text="which extraction found its mentions")


class EntityMemorySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    memory_type = serializers.CharField()
    kb = serializers.SlugField()
    text = serializers.CharField()
    surface = serializers.CharField(help_text="how this memory writes the entity")
    mode = serializers.ChoiceField(["deterministic", "llm"])
    occurred_at = serializers.DateTimeField(allow_null=True)
    sources = SourceSerializer(many=True)


class EntityChunkSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField()
    source = SourceSerializer()


class EntityDetailSerializer(EntitySerializer):
    aliases = serializers.ListField(child=serializers.CharField())
    memories = EntityMemorySerializer(many=True, help_text=f"at most {MAX_MEMORIES}, most recent first")
    chunks = EntityChunkSerializer(many=True, help_text="document chunks the memories cite that name it")


class EntityPagination(StrictPageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 100


def _modes(scope, entity_ids) -> dict[int, list[str]]:
    out: dict[int, set] = {}
    for entity_id, mode in readable_mentions(scope).filter(entity_id__in=entity_ids).values_list(
            "entity_id", "mode").distinct():
        out.setdefault(entity_id, set()).add(mode)
    return {k: sorted(v) for k, v in out.items()}


def _row(entity, modes) -> dict:
    return {"id": entity.pk, "name": entity.name, "type": entity.type, "value": entity.value,
            "mention_count": entity.mention_count, "modes": modes.get(entity.pk, [])}


class EntitiesView(APIView):
    pagination_class = EntityPagination

    @extend_schema(
        parameters=[OpenApiParameter("q", description="part of a name or alias (case, titles, possessives ignored)"),
                    OpenApiParameter("type", enum=list(Entity.Type.values)), OpenApiParameter("kb"),
                    OpenApiParameter("page", int), OpenApiParameter("page_size", int, description="at most 100")],
        responses=EntitySerializer(many=True),
    )
    def get(self, request):
        scope = request_scope(request)
        params = request.query_params
        kb_ids = scope.kb_ids
        if params.get("kb"):
            kb_ids = set(scope.tenant.knowledge_bases.filter(slug=params["kb"], pk__in=scope.kb_ids)
                         .values_list("pk", flat=True))
            if not kb_ids:
                raise ValidationError({"kb": f"Unknown knowledge base '{params['kb']}'."})
        qs = visible_entities(scope, kb_ids)
        kind = params.get("type")
        if kind is not None:  # present but empty is not a type either: the schema's enum says so
            if kind not in Entity.Type.values:
                raise ValidationError({"type": f"Use one of: {', '.join(Entity.Type.values)}."})
            qs = qs.filter(type=kind)
        q = params.get("q", "")
        if len(q) > MAX_QUERY:
            raise ValidationError({"q": f"At most {MAX_QUERY} characters."})
        if q.strip():
            key = entity_key(q) or q.strip().casefold()
            qs = qs.filter(pk__in=Entity.objects.filter(tenant=scope.tenant, aliases__key__contains=key).values("pk"))
        qs = qs.order_by("-mention_count", "name", "pk")
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(qs, request, view=self)
        modes = _modes(scope, [e.pk for e in page])
        return paginator.get_paginated_response([_row(e, modes) for e in page])


@extend_schema(parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)])
class EntityDetailView(APIView):
    @extend_schema(responses=EntityDetailSerializer)
    def get(self, request, pk: int):
        scope = request_scope(request)
        entity = visible_entities(scope).filter(pk=pk).first()
        if entity is None:  # another tenant's, or named only where the caller may not read: the same 404
            raise Http404("No such entity.")
        mentions = list(readable_mentions(scope).filter(entity=entity).select_related("memory__kb")
                        .prefetch_related("memory__source_chunks__document")
                        .order_by("-memory__occurred_at", "-memory__created_at")[:MAX_MEMORIES])
        aliases = sorted({a.surface for a in entity.aliases.all()})
        needles = {a.casefold() for a in aliases} | {entity.name.casefold()}
        chunks: dict[int, Chunk] = {}
        for m in mentions:
            for c in m.memory.source_chunks.all():
                if c.level == Chunk.Level.CHILD and any(n in c.text.casefold() for n in needles):
                    chunks.setdefault(c.pk, c)
        body = {
            **_row(entity, _modes(scope, [entity.pk])),
            "aliases": aliases,
            "memories": [{"id": m.memory.pk, "memory_type": m.memory.kind, "kb": m.memory.kb.slug,
                          "text": m.memory.text, "surface": m.surface, "mode": m.mode,
                          "occurred_at": m.memory.occurred_at, "sources": memory_sources(m.memory)}
                         for m in mentions],
            "chunks": [{"id": c.pk, "text": c.text, "source": _chunk_source(c)}
                       for c in sorted(chunks.values(), key=lambda c: (c.document_id, c.ordinal))],
        }
        return Response(EntityDetailSerializer(body).data)
