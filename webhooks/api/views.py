"""Webhook endpoints of the caller's tenant: owners and admins (or an unrestricted read-write key) manage them."""

from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.pagination import PageNumberPagination

from tenants.api.scoping import ScopedMixin
from tenants.models import ApiKey
from webhooks.api.serializers import WebhookDeliverySerializer, WebhookEndpointSerializer
from webhooks.events import start_cursors
from webhooks.models import WebhookEndpoint


class DeliveryPage(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class WebhookEndpointViewSet(ScopedMixin, viewsets.ModelViewSet):
    """Register URLs that receive signed events (document ready/failed, memory added/updated/deleted)."""

    serializer_class = WebhookEndpointSerializer
    queryset = WebhookEndpoint.objects.none()  # for the schema; get_queryset scopes every request
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # Every event of the tenant may leave the server through a webhook: managing them is a manager's right.
        key = request.auth if isinstance(request.auth, ApiKey) else None
        if key is not None:
            if not key.can_write or key.knowledge_bases.exists():
                raise PermissionDenied("Only a read-write key for the whole tenant can manage webhooks.")
        elif not self.scope.can_manage:
            raise PermissionDenied("Only owners and admins can manage webhooks.")

    def get_queryset(self):
        return WebhookEndpoint.objects.filter(tenant=self.scope.tenant).select_related("kb")

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["scope"] = getattr(self, "scope", None)
        context["show_secret"] = self.action == "create"
        return context

    def perform_create(self, serializer):
        endpoint = WebhookEndpoint(tenant=self.scope.tenant, created_by=self.scope.actor)
        start_cursors(endpoint)
        serializer.instance = serializer.save(tenant=self.scope.tenant, created_by=self.scope.actor,
                                              history_cursor=endpoint.history_cursor,
                                              documents_cursor=endpoint.documents_cursor)

    @action(detail=True, methods=["get"], serializer_class=WebhookDeliverySerializer)
    def deliveries(self, request, pk=None):
        """The endpoint's deliveries, newest first, with their status and last error."""
        endpoint = self.get_object()
        paginator = DeliveryPage()
        page = paginator.paginate_queryset(endpoint.deliveries.order_by("-created_at"), request, view=self)
        return paginator.get_paginated_response(WebhookDeliverySerializer(page, many=True).data)


