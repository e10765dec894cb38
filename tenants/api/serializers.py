from rest_framework import serializers

from common.api_fields import STRICT_TEXT_FIELDS
from tenants.models import KnowledgeBase, Tenant


class TenantSerializer(serializers.ModelSerializer):
    class Meta:
        model = Tenant
        fields = ["id", "slug", "name", "isolation", "created_at"]


class KnowledgeBaseSerializer(serializers.ModelSerializer):
    serializer_field_mapping = STRICT_TEXT_FIELDS
    # A language tag or "auto", checked as the schema states it: a free CharField took whitespace the
    # serializer trimmed to nothing and then stored the default (schemathesis, issue 30).
    language = serializers.RegexField(r"^(auto|[a-z]{2,3}(-[A-Za-z0-9]{2,8})?)$", max_length=16, required=False,
                                      trim_whitespace=False, help_text="default language: auto, en, zh, zh-Hans, …",
                                      error_messages={"invalid": "Use 'auto' or a language tag: en, zh, zh-Hans…"})
    document_count = serializers.IntegerField(read_only=True, default=0)
    memory_count = serializers.IntegerField(read_only=True, default=0)

    class Meta:
        model = KnowledgeBase
        fields = ["id", "slug", "name", "description", "language", "document_count", "memory_count",
                  "created_at", "updated_at"]
        read_only_fields = ["id", "created_at", "updated_at"]

    def validate_slug(self, value):
        tenant = self.context["tenant"]
        clash = KnowledgeBase.objects.filter(tenant=tenant, slug=value)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError(f"A knowledge base '{value}' already exists in this tenant.")
        return value
