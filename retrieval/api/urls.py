from django.urls import re_path

from retrieval.api.views import SearchView

urlpatterns = [re_path(r"^memories/search/?$", SearchView.as_view(), name="memory-search")]
