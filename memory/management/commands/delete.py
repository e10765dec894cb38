import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from memory.actions import delete_document, delete_knowledge_base, delete_tenant
from memory.curation import delete_memories, delete_memories_in_scope
from memory.models import Document, Memory
from tenants.access import Scope
from tenants.models import KnowledgeBase, Tenant

ACTOR = "manage.py delete"


class Command(BaseCommand):
    help = ("Delete a tenant, a knowledge base, a document, a memory, or a user's (or one session's) memories, from the "
            "database and both indexes, through the same actions as the API, the console and the admin.")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="tenant slug; alone, the whole tenant is deleted")
        parser.add_argument("--kb", help="knowledge base slug (with --user-id: only in this KB)")
        parser.add_argument("--document", type=int, help="document id")
        parser.add_argument("--memory", help="memory id (an episode takes its facts along)")
        parser.add_argument("--user-id", help="a conversation user's memories and messages")
        parser.add_argument("--session-id", help="with --user-id: only this session")
        parser.add_argument("--yes", action="store_true", help="really delete (without it, say what would go)")

    def handle(self, *args, **opts):
        tenant = Tenant.objects.filter(slug=opts["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant '{opts['tenant']}'.")
        kbs = KnowledgeBase.objects.filter(tenant=tenant)
        if opts["kb"]:
            kbs = kbs.filter(slug=opts["kb"])
            if not kbs.exists():
                raise CommandError(f"No knowledge base '{opts['kb']}' in tenant {tenant.slug}.")
        scope = Scope(tenant, frozenset(kbs.values_list("pk", flat=True)), True, True, ACTOR)
        if opts["session_id"] and not opts["user_id"]:
            raise CommandError("--session-id needs --user-id.")
        picked = [name for name in ("document", "memory", "user_id") if opts[name]]
        if len(picked) > 1:
            raise CommandError("Name one of --document, --memory, --user-id.")
        what, run = self._plan(tenant, scope, kbs, opts, picked[0] if picked else None)
        if not opts["yes"]:
            raise CommandError(f"Would delete {what}; run again with --yes.")
        deleted = self._delete(what, run)
        self.stdout.write(json.dumps({"deleted": what, **({"memories": deleted} if isinstance(deleted, int) else {})}))

    def _delete(self, what: str, run):
        """Run the delete; if the database part committed but removing index rows failed, say exactly that.

        Exit 1 either way, but a retry would find nothing to delete: the rows left behind are in
        knowledge bases the database still knows (or under a removed KB's tombstone), so `reconcile`
        reports them and `reconcile --repair` removes them.
        """
        committed = []
        try:
            # The action's own transaction nests in this one, so its index removals run on this
            # commit, after the marker registered first.
            with transaction.atomic():
                transaction.on_commit(lambda: committed.append(True))
                return run()
        except Exception as exc:
            if not committed:
                raise
            raise CommandError(
                f"Deleted {what} from the database, but removing its rows from the indexes failed "
                f"({type(exc).__name__}: {str(exc)[:300]}). There is nothing left to delete: "
                "`manage.py reconcile` reports the rows left behind and `manage.py reconcile --repair` "
                "removes them.") from exc

    def _plan(self, tenant, scope, kbs, opts, picked):
        if picked == "document":
            document = Document.objects.filter(kb__in=kbs, pk=opts["document"]).select_related("kb__tenant").first()
            if document is None:
                raise CommandError(f"No document {opts['document']} in tenant {tenant.slug}.")
            return f"document {document.pk} ({document.filename})", lambda: delete_document(scope, document)
        if picked == "memory":
            try:
                memory = Memory.objects.filter(kb__in=kbs, pk=opts["memory"]).first()
            except ValidationError:  # not a UUID
                memory = None
            if memory is None:
                raise CommandError(f"No memory {opts['memory']} in tenant {tenant.slug}.")
            return f"memory {memory.pk}", lambda: delete_memories([memory], actor=ACTOR)
        if picked == "user_id":
            label = f"memories of user {opts['user_id']}" + (f", session {opts['session_id']}" if opts["session_id"] else "")
            return label, lambda: delete_memories_in_scope(scope, scope.kb_ids, user_id=opts["user_id"],
                                                           session_id=opts["session_id"])
        if opts["kb"]:
            kb = kbs.get()
            return f"knowledge base {tenant.slug}/{kb.slug}", lambda: delete_knowledge_base(scope, kb)
        return f"tenant {tenant.slug}", lambda: delete_tenant(tenant, actor=ACTOR)
