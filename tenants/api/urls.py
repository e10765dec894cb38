from django.urls import path
from rest_framework.routers import SimpleRouter

from tenants.api.views import KnowledgeBaseViewSet, TenantListView

router = SimpleRouter()
router.trailing_slash = "/?"  # accept both /documents and /documents/
router.register("knowledge-bases", KnowledgeBaseViewSet, basename="knowledge-base")

urlpatterns = [path("tenants", TenantListView.as_view(), name="tenant-list"), *router.urls]
