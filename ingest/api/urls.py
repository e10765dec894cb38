from rest_framework.routers import SimpleRouter

from ingest.api.views import DocumentViewSet

router = SimpleRouter()
router.trailing_slash = "/?"  # accept both /documents and /documents/
router.register("documents", DocumentViewSet, basename="document")
urlpatterns = router.urls
