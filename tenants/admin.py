from django.contrib import admin

from tenants.models import ApiKey, KnowledgeBase, Membership, Tenant


class KnowledgeBaseInline(admin.TabularInline):
    model = KnowledgeBase
    extra = 0
    fields = ("slug", "name", "language")
    can_delete = False  # an inline delete would bypass delete_knowledge_base; delete from the KB's own page


# verbose_name of the memory history model, whose admin refuses every delete.
APPEND_ONLY_LOG = "memory history"


def _staff(request) -> str:
    return f"admin:{request.user.username}"


def _staff_scope(request, kb):
    from tenants.access import Scope

    return Scope(kb.tenant, frozenset([kb.pk]), True, True, _staff(request))


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "isolation", "created_at")
    list_filter = ("isolation",)
    search_fields = ("slug", "name")
    inlines = [KnowledgeBaseInline]

    # Every delete and isolation switch goes through the domain actions, so the index rows follow.
    def save_model(self, request, obj, form, change):
        from tenants.actions import set_isolation

        if change and "isolation" in form.changed_data:
            wanted, obj.isolation = obj.isolation, form.initial["isolation"]
            super().save_model(request, obj, form, change)
            set_isolation(obj, wanted, actor=_staff(request))
        else:
            super().save_model(request, obj, form, change)

    def get_deleted_objects(self, objs, request):
        # The memory history admin refuses deletes (the log is append-only), but a tenant's log goes
        # with the tenant: that one refusal must not block deleting the tenant. Named, not imported:
        # this app sits below the one that owns the model.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(APPEND_ONLY_LOG)
        return deleted, counts, perms_needed, protected

    def delete_model(self, request, obj):
        from ingest.actions import delete_tenant

        delete_tenant(obj, actor=_staff(request))

    def delete_queryset(self, request, queryset):
        from ingest.actions import delete_tenant

        for tenant in queryset:
            delete_tenant(tenant, actor=_staff(request))


@admin.register(KnowledgeBase)
class KnowledgeBaseAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "tenant", "language", "created_at")
    list_filter = ("tenant", "language")
    search_fields = ("slug", "name", "description")
    actions = ["reindex_selected"]

    def delete_model(self, request, obj):
        from ingest.actions import delete_knowledge_base

        delete_knowledge_base(_staff_scope(request, obj), obj)

    def delete_queryset(self, request, queryset):
        for kb in queryset.select_related("tenant"):
            self.delete_model(request, kb)

    @admin.action(description="Rebuild the index projections of the selected knowledge bases")
    def reindex_selected(self, request, queryset):
        from retrieval.projection import reindex

        total = sum(reindex(tenant=kb.tenant, kb=kb)["rows"] for kb in queryset)
        self.message_user(request, f"Reindexed {queryset.count()} knowledge base(s), {total} index rows.")


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
