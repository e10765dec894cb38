from rest_framework import generics

from tenants.access import tenants_for
from tenants.api.serializers import TenantSerializer
from tenants.models import ApiKey, Tenant

# The knowledge-base endpoints are memory/api/views.py: deleting a KB is the core's action.


class TenantListView(generics.ListAPIView):
    """The tenants the caller belongs to (an API key belongs to exactly one)."""

    serializer_class = TenantSerializer
    pagination_class = None

    def get_queryset(self):
        if isinstance(self.request.auth, ApiKey):
            return Tenant.objects.filter(pk=self.request.auth.tenant_id)
        return Tenant.objects.filter(pk__in=[t.pk for t in tenants_for(self.request.user)])
