import json

from django.core.management.base import BaseCommand, CommandError

from conversations.reflection import reflect
from tenants.models import Tenant


class Command(BaseCommand):
    help = ("Reflect over conversation memory, per user and per agent: merge near-duplicate facts (history kept), "
            "refresh agent skills, expire foresight past its window; --all also rebuilds every profile from its "
            "facts. Bounded by --budget seconds; running it again changes nothing. Prints one JSON report.")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="tenant slug (default: every tenant)")
        parser.add_argument("--user-id", help="only this conversation user")
        parser.add_argument("--agent-id", help="only this agent's memories ('' for those of no agent)")
        parser.add_argument("--all", action="store_true", help="also rebuild every profile from its facts")
        parser.add_argument("--budget", type=float, default=300.0, help="seconds before it stops between scopes")

    def handle(self, *args, **opts):
        tenant_id = None
        if opts["tenant"]:
            tenant = Tenant.objects.filter(slug=opts["tenant"]).first()
            if tenant is None:
                raise CommandError(f"No tenant '{opts['tenant']}'.")
            tenant_id = tenant.pk
        report = reflect(tenant_id=tenant_id, user_id=opts["user_id"], agent_id=opts["agent_id"],
                         budget_seconds=opts["budget"], rebuild_profiles=opts["all"])
        self.stdout.write(json.dumps(report.as_dict()))
