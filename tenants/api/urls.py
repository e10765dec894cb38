from django.urls import re_path

from tenants.api.keys import ApiKeyDetailView, ApiKeyListView
from tenants.api.views import TenantListView

urlpatterns = [
    re_path(r"^tenants/?$", TenantListView.as_view(), name="tenant-list"),
    re_path(r"^keys/?$", ApiKeyListView.as_view(), name="api-key-list"),
    re_path(r"^keys/(?P<key_id>[0-9a-f]{1,16})/?$", ApiKeyDetailView.as_view(), name="api-key-detail"),
]
