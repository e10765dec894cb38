from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.request import SearchError, parse_search_request
from retrieval.search import EngineError, search
from tenants.api.scoping import request_scope


class SearchView(APIView):
    """Search the memories (and chunks) of the knowledge bases the caller may read."""

    throttle_scope = "search"  # LOCI_RATE_LIMIT_SEARCH, beside the caller's overall rate

    @extend_schema(
        request={"application/json": {"type": "object"}},
        responses={200: {"type": "object"}},
        examples=[OpenApiExample("hybrid", value={"query": "When did Caroline go to the LGBTQ support group?",
                                                  "method": "hybrid", "top_k": 10,
                                                  "filters": {"kb": ["docs"]}})],
    )
    def post(self, request):
        scope = request_scope(request)
        try:
            return Response(search(scope, parse_search_request(request.data)))
        except SearchError as exc:
            raise ValidationError({"error": str(exc)})
        except EngineError as exc:  # 503 (an engine failed) or 504 (it did not answer in time), naming it
            return Response({"error": str(exc), "engine": exc.engine}, status=exc.status)
