import json
import sys

from django.core.management.base import BaseCommand, CommandError

from portability.importer import ImportFailed, import_into


class Command(BaseCommand):
    help = ("Read a `manage.py export` file into a tenant of this installation (created if missing), then build its "
            "indexes. Running it twice imports nothing new.")

    def add_arguments(self, parser):
        parser.add_argument("path", help="the export file ('-' for standard input)")
        parser.add_argument("--tenant", required=True, help="the target tenant (slug)")
        parser.add_argument("--kb", help="put everything into this knowledge base (slug) instead of the exported ones")
        parser.add_argument("--remap-ids", action="store_true",
                            help="give memories new ids (needed when this installation holds the source's ids)")

    def handle(self, *args, **opts):
        try:
            source = sys.stdin if opts["path"] == "-" else open(opts["path"], encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot read {opts['path']}: {exc.strerror}") from None
        try:
            counts = import_into(source, opts["tenant"], kb_slug=opts["kb"], remap_ids=opts["remap_ids"])
        except ImportFailed as exc:
            raise CommandError(f"Nothing was imported: {exc}") from None
        finally:
            if source is not sys.stdin:
                source.close()
        self.stdout.write(json.dumps(counts))
