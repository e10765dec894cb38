from django.http import FileResponse
from django.shortcuts import get_object_or_404
from django.db.models import Q
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from ingest.actions import cancel_document, ingest_document, rerun_document
from ingest.api.serializers import (WAITING_FOR, ChunkSerializer, DocumentSerializer, UploadResultSerializer,
                                    UploadSerializer)
from common.json_parser import StrictJSONParser
from memory.actions import delete_document
from memory.models import Document
from memory.user_metadata import MetadataError, clean_user_metadata
from tenants.api.scoping import ScopedMixin, requested_kb


# A part of a file name: longer than any name the filesystem allows, far below SQLite's LIKE limit.
MAX_NAME_QUERY_CHARS = 1000


def _status_is(wanted: list[str]) -> Q:
    """The statuses as the API shows them: `queued` includes a document waiting between two stages."""
    match = Q(pk__in=[])
    for status_name in wanted:
        if status_name == Document.Status.QUEUED:
            match |= Q(status=status_name) | Q(status__in=list(WAITING_FOR), claim_token__isnull=True)
        elif status_name in WAITING_FOR:
            match |= Q(status=status_name, claim_token__isnull=False)
        else:
            match |= Q(status=status_name)
    return match


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("kb", description="a knowledge base's slug"),
    OpenApiParameter("status", description="comma-separated: queued, parsing, extracting, indexing, ready, failed"),
    OpenApiParameter("type", description="comma-separated detected types: pdf, docx, txt, vtt, …"),
    OpenApiParameter("q", description="words in the file name"),
    OpenApiParameter("page", int),
]))
class DocumentViewSet(ScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                      viewsets.GenericViewSet):
    """Documents of the knowledge bases the caller may read; upload, re-run and delete need write access."""

    serializer_class = DocumentSerializer
    queryset = Document.objects.none()  # for the schema; get_queryset scopes every request
    parser_classes = [MultiPartParser, FormParser, StrictJSONParser]
    # Ids are integers: anything else matches no route (a JSON 404) instead of reaching a query as text.
    lookup_value_regex = "[0-9]+"

    def get_queryset(self):
        qs = Document.objects.in_scope(self.scope).select_related("kb")
        params = self.request.query_params
        if params.get("kb"):
            qs = qs.filter(kb=requested_kb(self.scope, params["kb"]))
        if params.get("status"):
            qs = qs.filter(_status_is(params["status"].split(",")))
        if params.get("type"):
            qs = qs.filter(detected_type__in=params["type"].split(","))
        if params.get("q"):
            if len(params["q"]) > MAX_NAME_QUERY_CHARS:  # SQLite refuses a LIKE pattern over 50,000 bytes
                raise ValidationError({"q": f"'q' is longer than {MAX_NAME_QUERY_CHARS:,} characters."})
            qs = qs.filter(filename__icontains=params["q"])
        return qs

    @extend_schema(request={"multipart/form-data": UploadSerializer},
                   responses={201: OpenApiResponse(UploadResultSerializer(many=True), description="at least one new file"),
                              200: OpenApiResponse(UploadResultSerializer(many=True), description="every file a duplicate")})
    def create(self, request):
        """Upload one or many files (multipart field `files`, repeated) into knowledge base `kb`."""
        files = request.FILES.getlist("files") or request.FILES.getlist("file")
        slug = request.data.get("kb")
        if not slug:
            raise ValidationError({"kb": "Name the target knowledge base (its slug)."})
        if not files:
            raise ValidationError({"files": "Attach at least one file in the multipart field 'files'."})
        try:
            metadata = clean_user_metadata(request.data.get("metadata"))
        except MetadataError as exc:
            raise ValidationError({"metadata": str(exc)}) from None
        kb = requested_kb(self.scope, slug)
        results = []
        for f in files:
            upload = ingest_document(self.scope, kb, f, f.name, content_type=f.content_type or "", metadata=metadata)
            results.append({"document": DocumentSerializer(upload.document).data, "duplicate": upload.duplicate})
        any_new = any(not r["duplicate"] for r in results)
        return Response(results, status=status.HTTP_201_CREATED if any_new else status.HTTP_200_OK)

    def perform_destroy(self, instance):
        delete_document(self.scope, instance)

    @extend_schema(request=None, responses={202: DocumentSerializer})
    @action(detail=True, methods=["post"])
    def rerun(self, request, pk=None):
        """Process a failed, finished or stalled document again from the start."""
        document = self.get_object()
        if not document.can_rerun:
            raise ValidationError({"status": f"The document is still {document.status} and moving; "
                                             "wait for it to finish."})
        document = rerun_document(self.scope, document)
        return Response(DocumentSerializer(document).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: DocumentSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel a queued or running document: it fails with "Cancelled by <you>"; re-run it to start again."""
        document = self.get_object()
        if not cancel_document(self.scope, document):
            raise ValidationError({"status": f"The document is already {document.status}; there is nothing to cancel."})
        return Response(DocumentSerializer(document).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=ChunkSerializer(many=True))
    @action(detail=True, methods=["get"])
    def chunks(self, request, pk=None):
        """The parsed structure: parent and child chunks in order."""
        document = self.get_object()
        page = self.paginate_queryset(document.chunks.order_by("level", "ordinal"))
        return self.get_paginated_response(ChunkSerializer(page, many=True).data)

    @extend_schema(responses={(200, "application/octet-stream"): bytes})
    @action(detail=True, methods=["get"])
    def original(self, request, pk=None):
        """Download the original file as uploaded."""
        document = get_object_or_404(self.get_queryset(), pk=pk)
        try:
            handle = document.original.open("rb")
        except (FileNotFoundError, ValueError):
            raise NotFound("The original file is missing from storage.") from None
        return FileResponse(handle, as_attachment=True, filename=document.filename)
