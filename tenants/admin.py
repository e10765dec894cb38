from django.contrib import admin

from tenants.models import ApiKey, Membership

# Tenants and knowledge bases are deleted (and switched) through the core's actions: their admin is
# in console/admin.py.


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("role", "tenant")
    search_fields = ("user__username", "tenant__slug")
    filter_horizontal = ("kb_grants",)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "tenant", "key_id", "can_read", "can_write", "last_used_at", "revoked_at")
    list_filter = ("tenant", "can_write")
    search_fields = ("name", "key_id")
    readonly_fields = ("key_id", "created_at", "last_used_at", "revoked_at")
    filter_horizontal = ("knowledge_bases",)
    actions = ["revoke_selected"]

    def has_add_permission(self, request):
        return False  # keys are issued by `manage.py bootstrap --api-key` or the API so the secret is shown once

    @admin.action(description="Revoke selected keys")
    def revoke_selected(self, request, queryset):
        for key in queryset.filter(revoked_at__isnull=True):
            key.revoke()
