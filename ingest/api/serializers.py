from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memory.models import Chunk, Document


# The stage a document between two stages waits for (it keeps the finished stage's status, no claim held).
WAITING_FOR = {Document.Status.PARSING: "extracting", Document.Status.EXTRACTING: "indexing"}


class DocumentSerializer(serializers.ModelSerializer):
    kb = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    metadata = serializers.JSONField(source="user_metadata", read_only=True,
                                     help_text="the uploader's metadata, on every chunk and memory of it")
    status = serializers.SerializerMethodField(
        help_text="queued while it waits for a worker (before its first stage or between two); parsing, "
                  "extracting or indexing while a worker runs that stage; ready or failed at the end")
    waiting_for = serializers.SerializerMethodField(
        help_text="while queued: the stage it waits for (parsing, extracting or indexing); else null")
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = Document
        fields = ["id", "kb", "filename", "sha256", "size", "content_type", "detected_type", "status", "waiting_for",
                  "stage",
                  "progress", "error", "attempts", "chunk_count", "episode_count", "fact_count", "page_count",
                  "retryable", "extraction_mode", "created_at", "updated_at", "started_at", "finished_at", "download_url",
                  "metadata"]
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(Document.Status.values))
    def get_status(self, obj) -> str:
        return "queued" if obj.status in WAITING_FOR and obj.claim_token is None else obj.status

    @extend_schema_field(serializers.ChoiceField(["parsing", *WAITING_FOR.values()], allow_null=True))
    def get_waiting_for(self, obj) -> str | None:
        if obj.status == Document.Status.QUEUED:
            return "parsing"
        return WAITING_FOR.get(obj.status) if obj.claim_token is None else None

    def get_download_url(self, obj) -> str:
        return f"/api/v1/documents/{obj.pk}/original"


class UploadSerializer(serializers.Serializer):
    kb = serializers.SlugField(help_text="slug of the target knowledge base")
    files = serializers.ListField(child=serializers.FileField(allow_empty_file=True), allow_empty=False)
    metadata = serializers.CharField(required=False, help_text="a JSON object of up to 16 string or number values "
                                                               "(tags, category, source…), filterable in search")


class UploadResultSerializer(serializers.Serializer):
    document = DocumentSerializer()
    duplicate = serializers.BooleanField()


class ChunkSerializer(serializers.ModelSerializer):
    class Meta:
        model = Chunk
        fields = ["id", "parent", "level", "ordinal", "text", "section_path", "page", "slide", "sheet",
                  "start_time", "end_time", "speaker", "token_count"]
