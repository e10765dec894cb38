from rest_framework import serializers

from tenants.models import KnowledgeBase
from webhooks.destinations import ForbiddenDestination, check_destination
from webhooks.models import EVENTS, WebhookDelivery, WebhookEndpoint


class WebhookEndpointSerializer(serializers.ModelSerializer):
    kb = serializers.SlugRelatedField(slug_field="slug", queryset=KnowledgeBase.objects.none(), required=False,
                                      allow_null=True, help_text="a knowledge base's slug; empty: the whole tenant")
    events = serializers.ListField(child=serializers.ChoiceField(choices=EVENTS), required=False, max_length=len(EVENTS),
                                   help_text="event types to deliver; empty or absent: all of them")
    url = serializers.URLField(max_length=2000)
    secret = serializers.SerializerMethodField(help_text="shown once, in the response that created the endpoint")

    class Meta:
        model = WebhookEndpoint
        fields = ["id", "url", "kb", "events", "description", "is_active", "secret", "created_by", "created_at",
                  "last_status", "last_attempt_at"]
        read_only_fields = ["id", "created_by", "created_at", "last_status", "last_attempt_at"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        scope = self.context.get("scope")
        if scope is not None:
            self.fields["kb"].queryset = KnowledgeBase.objects.filter(tenant=scope.tenant, id__in=scope.kb_ids)

    def get_secret(self, endpoint) -> str | None:
        return endpoint.secret if self.context.get("show_secret") else None

    def validate_url(self, value):
        try:
            check_destination(value)
        except ForbiddenDestination as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value

    def validate_events(self, value):
        return sorted(set(value))


class WebhookDeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookDelivery
        fields = ["id", "event", "status", "attempts", "next_attempt_at", "response_status", "last_error",
                  "created_at", "delivered_at", "payload"]
