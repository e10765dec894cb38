"""The knowledge-base endpoints. A KB is a tenant's row, but deleting one takes everything in it: the core's action."""

from django.db.models import Count, Q
from rest_framework import viewsets
from rest_framework.exceptions import PermissionDenied

from common.json_parser import StrictJSONParser
from memory.actions import delete_knowledge_base
from tenants.api.scoping import ScopedMixin, request_scope
from tenants.api.serializers import KnowledgeBaseSerializer
from tenants.models import ApiKey, KnowledgeBase


class KnowledgeBaseViewSet(ScopedMixin, viewsets.ModelViewSet):
    """Knowledge bases of the caller's tenant."""

    serializer_class = KnowledgeBaseSerializer
    queryset = KnowledgeBase.objects.none()  # for the schema; get_queryset scopes every request
    lookup_field = "slug"
    # JSON only: in a form a blank field reads as an omitted one (DRF's HTML-form rule), so
    # `language=` stored the default instead of being refused (schemathesis, issue 30).
    parser_classes = [StrictJSONParser]

    def get_queryset(self):
        return (
            KnowledgeBase.objects.filter(tenant=self.scope.tenant, id__in=self.scope.kb_ids)
            .annotate(
                document_count=Count("documents", distinct=True),
                memory_count=Count("memories", filter=Q(memories__status="active"), distinct=True),
            )
            .order_by("slug")
        )

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["tenant"] = request_scope(self.request).tenant
        return context

    def perform_create(self, serializer):
        # Creating a KB widens the tenant, so it takes a manager (or an unrestricted write key).
        self._require_manager()
        serializer.save(tenant=self.scope.tenant)

    def perform_update(self, serializer):
        serializer.save()

    def perform_destroy(self, instance):
        self._require_manager()
        delete_knowledge_base(self.scope, instance)

    def _require_manager(self):
        key = self.request.auth if isinstance(self.request.auth, ApiKey) else None
        if key is not None:
            if key.knowledge_bases.exists():
                raise PermissionDenied("A key limited to some knowledge bases cannot create or delete them.")
            return
        if not self.scope.can_manage:
            raise PermissionDenied("Only owners and admins can create or delete knowledge bases.")
