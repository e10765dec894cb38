import json

from django.core.management.base import BaseCommand, CommandError

from retrieval.projection import reindex
from tenants.models import KnowledgeBase, Tenant


class Command(BaseCommand):
    help = "Rebuild the vector and keyword index projections from the database."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="only this tenant (slug)")
        parser.add_argument("--kb", help="only this knowledge base (slug; needs --tenant)")

    def handle(self, *args, **opts):
        tenant = kb = None
        if opts["tenant"]:
            tenant = Tenant.objects.filter(slug=opts["tenant"]).first()
            if tenant is None:
                raise CommandError(f"No tenant '{opts['tenant']}'.")
        if opts["kb"]:
            if tenant is None:
                raise CommandError("--kb needs --tenant.")
            kb = KnowledgeBase.objects.filter(tenant=tenant, slug=opts["kb"]).first()
            if kb is None:
                raise CommandError(f"No knowledge base '{opts['kb']}' in '{tenant.slug}'.")
        result = reindex(tenant=tenant, kb=kb, log_progress=lambda msg: self.stderr.write(msg))
        self.stdout.write(json.dumps(result))
