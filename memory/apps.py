from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """The core: the rows every app shares (documents, chunks, messages, memories, their history) and the
    actions that change them. It depends on `tenants` only; ingest, retrieval and the console depend on it."""

    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"
