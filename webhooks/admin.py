from django.contrib import admin

from webhooks.models import WebhookDelivery, WebhookEndpoint


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    list_display = ["url", "tenant", "kb", "is_active", "last_status", "last_attempt_at"]
    list_filter = ["is_active", "tenant"]
    readonly_fields = ["history_cursor", "documents_cursor", "last_status", "last_attempt_at", "created_at"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["event", "endpoint", "status", "attempts", "response_status", "next_attempt_at", "created_at"]
    list_filter = ["status", "event"]
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]
