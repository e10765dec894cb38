from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    """Conversation memory: chat turns into MemCells, episodes, facts, foresight, profiles and agent skills,
    and the memories REST surface (/api/v1/memories…, /api/v1/profiles/…). No models of its own: its rows
    are the core's (memory.models), extraction jobs included."""

    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported here: the receivers use the models, which exist only once the registry is ready.
        from conversations import profiles_sync

        profiles_sync.connect()  # profiles follow deletes and edits of the facts they cite
        # The job sweeper starts in loci/worker_receivers.py, which only a worker imports.
