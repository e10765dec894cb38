from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView

from common import metrics
from loci import health
from loci.schema_view import SchemaView

admin.autodiscover()  # settings: SimpleAdminConfig, so only the processes that serve pages load the admin

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema", template_name="api/redoc.html"), name="redoc"),
    path("api/v1/", include("tenants.api.urls")),
    path("api/v1/", include("memory.api.urls")),
    path("api/v1/", include("ingest.api.urls")),
    path("api/v1/", include("conversations.api.urls")),
    path("api/v1/", include("retrieval.api.urls")),
    path("api/v1/", include("webhooks.api.urls")),
    path("api/v1/", include("portability.api.urls")),
    path("", include("console.urls")),
]

# JSON under /api/, Django's pages elsewhere (common/api_errors.py).
handler400 = "common.api_errors.bad_request"
handler404 = "common.api_errors.not_found"
handler500 = "common.api_errors.server_error"
