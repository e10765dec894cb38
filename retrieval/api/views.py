from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.api.examples import HYBRID_REQUEST, HYBRID_RESPONSE, KEYWORD_CHUNKS_REQUEST
from retrieval.api.serializers import EngineErrorSerializer, SearchRequestSerializer, SearchResponseSerializer
from retrieval.request import SearchError, parse_search_request
from retrieval.search import EngineError, search
from tenants.api.scoping import request_scope
from tenants.rate_limits import charge_search_cpu


class SearchView(APIView):
    """Search the memories (and chunks) of the knowledge bases the caller may read."""

    throttle_scope = "search"  # LOCI_RATE_LIMIT_SEARCH, beside the caller's overall rate

    @extend_schema(
        request=SearchRequestSerializer,
        responses={
            200: SearchResponseSerializer,
            503: OpenApiResponse(EngineErrorSerializer, description="an index engine failed"),
            504: OpenApiResponse(EngineErrorSerializer, description="an index engine did not answer within "
                                                                    "SEARCH_ENGINE_TIMEOUT_SECONDS"),
        },
        examples=[
            OpenApiExample("hybrid", value=HYBRID_REQUEST, request_only=True),
            OpenApiExample("keyword with chunks", value=KEYWORD_CHUNKS_REQUEST, request_only=True),
            OpenApiExample("hybrid", value=HYBRID_RESPONSE, response_only=True, status_codes=["200"]),
        ],
    )
    def post(self, request):
        scope = request_scope(request)
        try:
            response = search(scope, parse_search_request(request.data))
            charge_search_cpu(request, response["query"]["cpu_ms"] / 1000)  # LOCI_SEARCH_CPU_PER_MINUTE
            return Response(response)
        except SearchError as exc:
            raise ValidationError({"error": str(exc)})
        except EngineError as exc:  # 503 (an engine failed) or 504 (it did not answer in time), naming it
            return Response({"error": str(exc), "engine": exc.engine}, status=exc.status)
