from django.apps import AppConfig
from django.db.backends.signals import connection_created

from common import sql_in, tracing
from common.sqlite import use_wal


def _sqlite_in_wal(sender, connection, **kwargs) -> None:
    if connection.vendor == "sqlite":
        use_wal(connection.connection, float(connection.settings_dict["OPTIONS"].get("timeout", 5)))


class LociConfig(AppConfig):
    name = "loci"
    verbose_name = "Loci"

    def ready(self) -> None:
        connection_created.connect(_sqlite_in_wal, dispatch_uid="loci.sqlite_in_wal")
        sql_in.install()  # a long `__in` list is one parameter: no "too many SQL variables"
        tracing.configure()  # spans to LOCI_OTLP_ENDPOINT, in every process (web, worker, commands); else off
