"""The web console's pages (the REST API lives under /api/v1/, see loci/urls.py)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from ingest import views as ingest_views
from retrieval import views as retrieval_views
from tenants import views as tenant_views
from tenants.sign_in import SignInForm

app_name = "console"

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True, authentication_form=SignInForm),
         name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("switch/", tenant_views.switch, name="switch"),
    path("", tenant_views.kb_list, name="kb-list"),
    path("kbs/new/", tenant_views.kb_create, name="kb-create"),
    path("kbs/<slug:slug>/edit/", tenant_views.kb_edit, name="kb-edit"),
    path("kbs/<slug:slug>/delete/", tenant_views.kb_delete, name="kb-delete"),
    path("upload/", ingest_views.upload, name="upload"),
    path("documents/", ingest_views.document_list, name="document-list"),
    path("documents/status.json", ingest_views.document_status, name="document-status"),
    path("documents/<int:pk>/", ingest_views.document_detail, name="document-detail"),
    path("documents/<int:pk>/original/", ingest_views.document_original, name="document-original"),
    path("documents/<int:pk>/rerun/", ingest_views.document_rerun, name="document-rerun"),
    path("documents/<int:pk>/delete/", ingest_views.document_delete, name="document-delete"),
    path("memories/", ingest_views.memory_list, name="memory-list"),
    path("search/", retrieval_views.search_page, name="search"),
]
