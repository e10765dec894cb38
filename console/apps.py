from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The web console and the Django admin: the pages, sharing one shell (console/shell.py).

    The top of the dependency graph: it uses every app, and no app uses it.
    """

    name = "console"
