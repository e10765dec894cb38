from rest_framework.routers import SimpleRouter

from webhooks.api.views import WebhookEndpointViewSet

router = SimpleRouter()
router.trailing_slash = "/?"  # accept both /webhooks and /webhooks/
router.register("webhooks", WebhookEndpointViewSet, basename="webhook")

urlpatterns = router.urls
