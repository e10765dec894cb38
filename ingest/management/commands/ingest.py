import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ingest.actions import ingest_document
from ingest.tasks import run_inline
from memory.models import Document
from tenants.access import Scope
from tenants.models import KnowledgeBase, Tenant

# With --wait, a document nobody has picked up after this long is processed in this process,
# so the command alone is enough on a machine with no worker running.
INLINE_AFTER_SECONDS = 5.0


class Command(BaseCommand):
    help = "Create documents from files or folders (recursively), queue them, and with --wait block until each ends."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+")
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--kb", required=True)
        parser.add_argument("--wait", action="store_true", help="block until every document is ready or failed")
        parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait in total")

    def handle(self, *args, **opts):
        tenant = Tenant.objects.filter(slug=opts["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant '{opts['tenant']}'. Create it with: manage.py bootstrap --tenant … --kb …")
        kb = KnowledgeBase.objects.filter(tenant=tenant, slug=opts["kb"]).first()
        if kb is None:
            raise CommandError(f"No knowledge base '{opts['kb']}' in tenant '{tenant.slug}'.")
        scope = Scope(tenant, frozenset([kb.pk]), True, True, "cli:ingest")
        files = sorted(self._files(opts["paths"]))
        if not files:
            raise CommandError("No files found under the given paths.")
        documents, self._ended = [], {}  # document id -> how it ended (or where it was when output)
        for path in files:
            with path.open("rb") as fh:
                upload = ingest_document(scope, kb, fh, path.name)
            documents.append((upload.document, upload.duplicate))
        if not opts["wait"]:
            for document, duplicate in documents:
                self._emit(document, duplicate)
            return
        self._wait(documents, opts["timeout"])

    def _files(self, paths):
        for raw in paths:
            path = Path(raw)
            if path.is_dir():
                yield from (p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            elif path.is_file():
                yield path
            else:
                raise CommandError(f"No such file or folder: {raw}")

    def _wait(self, documents, timeout):
        deadline = time.monotonic() + timeout
        pending = {d.pk: (d, dup) for d, dup in documents}
        first_seen = {pk: time.monotonic() for pk in pending}
        while pending and time.monotonic() < deadline:
            for pk in list(pending):
                document = Document.objects.get(pk=pk)
                if document.is_finished:
                    self._emit(document, pending.pop(pk)[1])
                elif document.status == Document.Status.QUEUED and time.monotonic() - first_seen[pk] > INLINE_AFTER_SECONDS:
                    document = run_inline(pk)
                    if document.is_finished:
                        self._emit(document, pending.pop(pk)[1])
            if pending:
                time.sleep(0.5)
        for document, duplicate in pending.values():
            document.refresh_from_db()
            self._emit(document, duplicate, timed_out=True)
        # A script must be able to tell: non-zero when any document did not end ready.
        unfinished = [(pk, status) for pk, status in self._ended.items() if status != Document.Status.READY]
        if unfinished:
            listed = ", ".join(f"{pk} ({status})" for pk, status in unfinished[:20])
            raise CommandError(f"{len(unfinished)} of {len(self._ended)} document(s) did not end ready: {listed}")

    def _emit(self, document, duplicate, timed_out=False):
        self._ended[document.pk] = "timed out" if timed_out and not document.is_finished else document.status
        record = {
            "document_id": document.pk,
            "name": document.filename,
            "status": document.status,
            "chunks": document.chunk_count,
            "episodes": document.episode_count,
            "facts": document.fact_count,
            "error": document.error or ("timed out waiting" if timed_out else None),
        }
        if duplicate:
            record["duplicate"] = True
        self.stdout.write(json.dumps(record, ensure_ascii=False))
