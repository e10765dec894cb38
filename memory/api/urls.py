from rest_framework.routers import SimpleRouter

from memory.api.views import KnowledgeBaseViewSet

router = SimpleRouter()
router.trailing_slash = "/?"  # accept both /knowledge-bases and /knowledge-bases/
router.register("knowledge-bases", KnowledgeBaseViewSet, basename="knowledge-base")

urlpatterns = router.urls
