from django.apps import AppConfig


class EntitiesConfig(AppConfig):
    name = "entities"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from entities import signals  # noqa: F401 - connects the memory signal receivers
