import os

from django.core.management.base import BaseCommand, CommandError

from integrations.mcp_server import build_server
from retrieval import warmup
from tenants.models import ApiKey


class Command(BaseCommand):
    help = ("Serve Loci to an MCP client (an agent, an IDE) over stdin/stdout, acting as one API key "
            "(--api-key, else LOCI_API_KEY) with exactly its permissions.")

    def add_arguments(self, parser):
        parser.add_argument("--api-key", default=os.environ.get("LOCI_API_KEY", ""),
                            help="the API key every tool call acts as (default: $LOCI_API_KEY)")

    def handle(self, *args, **opts):
        token = opts["api_key"].strip()
        if not token:
            raise CommandError("No API key: pass --api-key or set LOCI_API_KEY (create one with "
                               "`manage.py bootstrap --api-key`).")
        # Refused before serving, so a client configured with a wrong key hears it at once, not per tool call.
        if ApiKey.verify(token) is None:
            raise CommandError("Invalid or revoked API key.")
        # Every call still resolves the key again: a key revoked while the server runs stops working.
        warmup.start()  # loaded while the client connects: its first search does not pay for it in the deadline
        build_server(lambda ctx: token).run("stdio")
