from django.urls import re_path

from retrieval.api.entities import EntitiesView, EntityDetailView
from retrieval.api.views import SearchView

urlpatterns = [
    re_path(r"^memories/search/?$", SearchView.as_view(), name="memory-search"),
    re_path(r"^entities/?$", EntitiesView.as_view(), name="entities"),
    re_path(r"^entities/(?P<pk>[0-9]+)/?$", EntityDetailView.as_view(), name="entity-detail"),
]
