from django.urls import path, re_path

from ingest.api.agent_feedback import MemoryFeedbackView
from ingest.api.memories import MemoriesView, MemoryDetailView, MemoryFlushView
from ingest.api.memory_history import MemoryHistoryView
from ingest.api.profiles import ProfileView

# `memories/search` lives in retrieval.api.urls; the detail route takes UUIDs only, so it never shadows it.
urlpatterns = [
    re_path(r"^memories/?$", MemoriesView.as_view(), name="memories"),
    re_path(r"^memories/flush/?$", MemoryFlushView.as_view(), name="memories-flush"),
    path("memories/<uuid:pk>", MemoryDetailView.as_view(), name="memory-detail"),
    path("memories/<uuid:pk>/history", MemoryHistoryView.as_view(), name="memory-history"),
    path("memories/<uuid:pk>/feedback", MemoryFeedbackView.as_view(), name="memory-feedback"),
    path("profiles/<str:user_id>", ProfileView.as_view(), name="profile"),
]
