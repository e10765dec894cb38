"""The Django admin of the rows whose changes span apps: every delete and edit goes through the domain actions.

Tenants' own rows without such changes (memberships, API keys) keep their admin in tenants/admin.py.
"""

from django.contrib import admin, messages

from ingest.actions import rerun_document
from memory.actions import delete_chunks, delete_document, delete_knowledge_base, delete_tenant
from memory.curation import delete_memories, delete_messages, set_memory_status, update_memory_text
from memory.models import Chunk, Document, Memory, MemoryHistory, Message
from retrieval.projection import reindex
from tenants.access import Scope
from tenants.actions import set_isolation
from tenants.models import KnowledgeBase, Tenant


def _staff(request) -> str:
    return f"admin:{request.user.username}"


def _staff_scope(request, kb):
    return Scope(kb.tenant, frozenset([kb.pk]), True, True, _staff(request))


class KnowledgeBaseInline(admin.TabularInline):
    model = KnowledgeBase
    extra = 0
    fields = ("slug", "name", "language")
    can_delete = False  # an inline delete would bypass delete_knowledge_base; delete from the KB's own page


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "isolation", "created_at")
    list_filter = ("isolation",)
    search_fields = ("slug", "name")
    inlines = [KnowledgeBaseInline]

    # Every delete and isolation switch goes through the domain actions, so the index rows follow.
    def save_model(self, request, obj, form, change):
        if change and "isolation" in form.changed_data:
            wanted, obj.isolation = obj.isolation, form.initial["isolation"]
            super().save_model(request, obj, form, change)
            set_isolation(obj, wanted, actor=_staff(request))
        else:
            super().save_model(request, obj, form, change)

    def get_deleted_objects(self, objs, request):
        # The memory history admin refuses deletes (the log is append-only), but a tenant's log goes
        # with the tenant: that one refusal must not block deleting the tenant.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(MemoryHistory._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    def delete_model(self, request, obj):
        delete_tenant(obj, actor=_staff(request))

    def delete_queryset(self, request, queryset):
        for tenant in queryset:
            delete_tenant(tenant, actor=_staff(request))


@admin.register(KnowledgeBase)
class KnowledgeBaseAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "tenant", "language", "created_at")
    list_filter = ("tenant", "language")
    search_fields = ("slug", "name", "description")
    actions = ["reindex_selected"]

    def delete_model(self, request, obj):
        delete_knowledge_base(_staff_scope(request, obj), obj)

    def delete_queryset(self, request, queryset):
        for kb in queryset.select_related("tenant"):
            self.delete_model(request, kb)

    @admin.action(description="Rebuild the index projections of the selected knowledge bases")
    def reindex_selected(self, request, queryset):
        total = sum(reindex(tenant=kb.tenant, kb=kb)["rows"] for kb in queryset)
        self.message_user(request, f"Reindexed {queryset.count()} knowledge base(s), {total} index rows.")


class ChunkInline(admin.TabularInline):
    model = Chunk
    extra = 0
    fields = ("level", "ordinal", "section_path", "page", "slide", "sheet", "start_time", "token_count")
    readonly_fields = fields
    can_delete = False
    show_change_link = True
    max_num = 0


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ("filename", "kb", "detected_type", "status", "progress", "chunk_count", "episode_count",
                    "fact_count", "created_at")
    list_filter = ("status", "detected_type", "extraction_mode", "kb__tenant", "kb")
    search_fields = ("filename", "sha256", "error")
    readonly_fields = ("sha256", "size", "detected_type", "status", "stage", "progress", "error", "attempts",
                       "chunk_count", "episode_count", "fact_count", "page_count", "extraction_mode",
                       "created_at", "updated_at", "started_at", "finished_at")
    actions = ["rerun_selected"]

    # Deletes (one, or "delete selected") go through the domain action, so the index rows follow.
    def delete_model(self, request, obj):
        scope = Scope(obj.kb.tenant, frozenset([obj.kb_id]), True, True, _staff(request))
        delete_document(scope, obj)

    def delete_queryset(self, request, queryset):
        for doc in queryset.select_related("kb__tenant"):
            self.delete_model(request, doc)

    @admin.action(description="Re-run selected failed or finished documents")
    def rerun_selected(self, request, queryset):
        count = 0
        for doc in queryset.select_related("kb__tenant"):
            scope = Scope(doc.kb.tenant, frozenset([doc.kb_id]), True, True, _staff(request))
            if rerun_document(scope, doc).status == Document.Status.QUEUED:
                count += 1
        self.message_user(request, f"Queued {count} document(s) again.", messages.SUCCESS)


@admin.register(Chunk)
class ChunkAdmin(admin.ModelAdmin):
    list_display = ("id", "document", "level", "ordinal", "page", "slide", "sheet", "token_count")
    list_filter = ("level", "document__kb")
    search_fields = ("text",)
    raw_id_fields = ("document", "parent")

    # Deleting a document lists its chunks for deletion too; either way their index rows follow.
    def delete_model(self, request, obj):
        delete_chunks([obj])

    def delete_queryset(self, request, queryset):
        delete_chunks(queryset)


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ("short_text", "kind", "status", "topic", "kb", "user_id", "extraction_mode", "created_at")
    list_filter = ("kind", "status", "extraction_mode", "tenant", "kb")
    search_fields = ("text", "topic", "user_id", "session_id")
    raw_id_fields = ("document", "parent", "superseded_by")
    readonly_fields = ("content_hash", "created_at", "updated_at", "source_message_ids")
    exclude = ("source_chunks",)
    actions = ["disable_selected", "enable_selected"]

    @admin.display(description="text")
    def short_text(self, obj):
        return obj.text[:100]

    def save_model(self, request, obj, form, change):
        # Edits go through the memory actions so history rows and the indexes follow.
        actor = _staff(request)
        if change:
            old = Memory.objects.get(pk=obj.pk)
            if old.text != obj.text:
                update_memory_text(old, obj.text, actor=actor)
            if old.status != obj.status:
                set_memory_status(Memory.objects.filter(pk=obj.pk), obj.status, actor=actor)
            Memory.objects.filter(pk=obj.pk).update(topic=obj.topic, metadata=obj.metadata)
        else:
            super().save_model(request, obj, form, change)

    def delete_model(self, request, obj):
        delete_memories([obj], actor=_staff(request), reason="deleted in the admin")

    def delete_queryset(self, request, queryset):
        delete_memories(queryset, actor=_staff(request), reason="deleted in the admin")

    @admin.action(description="Disable selected memories (removed from search)")
    def disable_selected(self, request, queryset):
        n = set_memory_status(queryset, Memory.Status.DISABLED, actor=_staff(request))
        self.message_user(request, f"Disabled {n} memories.")

    @admin.action(description="Enable selected memories")
    def enable_selected(self, request, queryset):
        n = set_memory_status(queryset, Memory.Status.ACTIVE, actor=_staff(request))
        self.message_user(request, f"Enabled {n} memories.")


@admin.register(MemoryHistory)
class MemoryHistoryAdmin(admin.ModelAdmin):
    list_display = ("memory_id", "event", "old_status", "new_status", "actor", "reason", "created_at")
    list_filter = ("event", "tenant")
    search_fields = ("memory_id", "old_text", "new_text", "actor")

    # The log is append-only: rows are written by the memory actions, never by hand.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("session_id", "message_id", "user_id", "sender_name", "timestamp", "segment_id")
    list_filter = ("kb",)
    search_fields = ("content", "user_id", "session_id", "message_id")

    # Through the one message delete, so the memories extracted from them leave the indexes too.
    def delete_model(self, request, obj):
        delete_messages([obj], actor=_staff(request), reason="its message was deleted in the admin")

    def delete_queryset(self, request, queryset):
        delete_messages(queryset, actor=_staff(request), reason="its message was deleted in the admin")
