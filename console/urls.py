"""The web console's pages (the REST API lives under /api/v1/, see loci/urls.py)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from console import documents, entities, keys, knowledge_bases, memories, search
from tenants.sign_in import SignInForm

app_name = "console"

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True, authentication_form=SignInForm),
         name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("switch/", knowledge_bases.switch, name="switch"),
    path("", knowledge_bases.kb_list, name="kb-list"),
    path("kbs/new/", knowledge_bases.kb_create, name="kb-create"),
    path("kbs/<slug:slug>/edit/", knowledge_bases.kb_edit, name="kb-edit"),
    path("kbs/<slug:slug>/delete/", knowledge_bases.kb_delete, name="kb-delete"),
    path("upload/", documents.upload, name="upload"),
    path("documents/", documents.document_list, name="document-list"),
    path("documents/bulk/", documents.document_bulk, name="document-bulk"),
    path("documents/status.json", documents.document_status, name="document-status"),
    path("documents/<int:pk>/", documents.document_detail, name="document-detail"),
    path("documents/<int:pk>/original/", documents.document_original, name="document-original"),
    path("documents/<int:pk>/rerun/", documents.document_rerun, name="document-rerun"),
    path("documents/<int:pk>/view/", documents.document_view, name="document-view"),
    path("documents/<int:pk>/slides.pdf", documents.document_slides_pdf, name="document-slides-pdf"),
    path("documents/<int:pk>/attachments/<int:number>/", documents.document_attachment, name="document-attachment"),
    path("documents/<int:pk>/cancel/", documents.document_cancel, name="document-cancel"),
    path("documents/<int:pk>/delete/", documents.document_delete, name="document-delete"),
    path("memories/", memories.memory_list, name="memory-list"),
    path("memories/<uuid:pk>/history/", memories.memory_history_page, name="memory-history"),
    path("memories/<uuid:pk>/edit/", memories.memory_edit, name="memory-edit"),
    path("search/", search.search_page, name="search"),
    path("entities/", entities.entity_list, name="entity-list"),
    path("entities/<int:pk>/", entities.entity_detail, name="entity-detail"),
    path("profiles/<str:user_id>/", entities.profile_detail, name="profile-detail"),
    path("keys/", keys.key_list, name="key-list"),
    path("keys/<str:key_id>/rename/", keys.key_rename, name="key-rename"),
    path("keys/<str:key_id>/revoke/", keys.key_revoke, name="key-revoke"),
]
