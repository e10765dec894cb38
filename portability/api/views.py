"""GET /export: what the caller may read, as the JSON Lines `manage.py import` reads."""

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.views import APIView

from portability.export import export_lines
from tenants.api.scoping import request_scope


class ExportView(APIView):
    @extend_schema(
        summary="Export memories with their history, sources and scopes (JSON Lines)",
        parameters=[
            OpenApiParameter("kb", OpenApiTypes.STR, many=True, description="knowledge base slugs (repeatable); "
                             "default: every one the caller may read"),
            OpenApiParameter("user_id", OpenApiTypes.STR, description="only this user's messages and memories"),
            OpenApiParameter("originals", OpenApiTypes.BOOL, description="include the original files (base64)"),
        ],
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR},
    )
    def get(self, request):
        scope = request_scope(request)
        slugs = request.query_params.getlist("kb")
        kb_ids = None
        if slugs:
            found = dict(scope.knowledge_bases().filter(slug__in=slugs).values_list("slug", "id"))
            missing = sorted(set(slugs) - set(found))
            if missing:
                raise ValidationError({"kb": f"No knowledge base {', '.join(missing)} you can read."})
            kb_ids = set(found.values())
        user_id = request.query_params.get("user_id") or None
        originals = _flag(request.query_params.get("originals"), "originals")
        name = f"loci-export-{scope.tenant.slug}-{timezone.now():%Y%m%d-%H%M%S}.jsonl"
        response = StreamingHttpResponse(export_lines(scope, kb_ids=kb_ids, user_id=user_id, originals=originals),
                                         content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response


def _flag(value: str | None, name: str) -> bool:
    if value is None:
        return False
    if value.lower() in ("1", "true"):
        return True
    if value.lower() in ("0", "false"):
        return False
    raise ValidationError({name: "Use true or false."})
