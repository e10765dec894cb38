from django.urls import re_path

from conversations.api.agent_feedback import MemoryFeedbackView
from conversations.api.extraction_jobs import ExtractionJobView
from conversations.api.memories import MemoriesView, MemoryDetailView, MemoryFlushView
from conversations.api.memory_history import MemoryHistoryView
from conversations.api.profiles import ProfileView

# `memories/search` lives in retrieval.api.urls; the detail route takes UUIDs only, so it never shadows it.
UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # as <uuid:…> matches

urlpatterns = [
    re_path(r"^memories/?$", MemoriesView.as_view(), name="memories"),
    re_path(r"^memories/flush/?$", MemoryFlushView.as_view(), name="memories-flush"),
    re_path(rf"^memories/jobs/(?P<pk>{UUID})/?$", ExtractionJobView.as_view(), name="memories-job"),
    # Every route takes a trailing slash or none (the schema writes none): one rule for every path.
    re_path(rf"^memories/(?P<pk>{UUID})/?$", MemoryDetailView.as_view(), name="memory-detail"),
    re_path(rf"^memories/(?P<pk>{UUID})/history/?$", MemoryHistoryView.as_view(), name="memory-history"),
    re_path(rf"^memories/(?P<pk>{UUID})/feedback/?$", MemoryFeedbackView.as_view(), name="memory-feedback"),
    re_path(r"^profiles/(?P<user_id>[^/]+)/?$", ProfileView.as_view(), name="profile"),
]
