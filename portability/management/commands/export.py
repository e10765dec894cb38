import sys

from django.core.management.base import BaseCommand, CommandError

from portability.export import export_lines
from tenants.access import Scope
from tenants.models import KnowledgeBase, Tenant


class Command(BaseCommand):
    help = ("Write a tenant's, a knowledge base's or a user's memories with their history, sources and scopes as "
            "JSON Lines (read back with `manage.py import`).")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="the tenant (slug)")
        parser.add_argument("--kb", action="append", help="only this knowledge base (slug; repeatable)")
        parser.add_argument("--user", help="only this user's messages and memories (user_id)")
        parser.add_argument("--originals", action="store_true", help="include the original files (base64)")
        parser.add_argument("--output", "-o", help="file to write (default: standard output)")

    def handle(self, *args, **opts):
        tenant = Tenant.objects.filter(slug=opts["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant '{opts['tenant']}'.")
        kbs = KnowledgeBase.objects.filter(tenant=tenant)
        kb_ids = set(kbs.values_list("id", flat=True))
        if opts["kb"]:
            chosen = dict(kbs.filter(slug__in=opts["kb"]).values_list("slug", "id"))
            missing = sorted(set(opts["kb"]) - set(chosen))
            if missing:
                raise CommandError(f"No knowledge base {', '.join(missing)} in '{tenant.slug}'.")
            kb_ids = set(chosen.values())
        scope = Scope(tenant, frozenset(kb_ids), can_write=False, can_manage=False, actor="manage.py export")
        out = open(opts["output"], "w", encoding="utf-8") if opts["output"] else sys.stdout
        try:
            lines = 0
            for line in export_lines(scope, user_id=opts["user"], originals=opts["originals"]):
                out.write(line)
                lines += 1
        finally:
            if out is not sys.stdout:
                out.close()
        self.stderr.write(f"{lines} lines written")
