from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The web console and the Django admin: the pages, sharing one shell (console/shell.py).

    The top of the dependency graph: it uses every app, and no app uses it.
    """

    name = "console"

    def ready(self):
        # Imported here: the receivers use the settings and the models' signals once the registry is ready.
        from console import slide_previews
        from memory import signals

        signals.document_deleted.connect(slide_previews.remove_document_previews,
                                         dispatch_uid="console.remove_document_previews")
        signals.knowledge_bases_deleted.connect(slide_previews.remove_knowledge_base_previews,
                                                dispatch_uid="console.remove_knowledge_base_previews")
