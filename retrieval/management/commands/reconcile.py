import json

from django.core.management.base import BaseCommand, CommandError

from entities.projection import reconcile_entities
from retrieval.backends import index_upgrade
from retrieval.embeddings import identity
from retrieval.projection import reconcile, reconcile_removed
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Compare the database with the indexes (and the entity projection) and report (or, with --repair, fix) rows present in one but not the other."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="only this tenant (slug)")
        parser.add_argument("--repair", action="store_true", help="write missing rows and delete stale ones")

    def handle(self, *args, **opts):
        tenants = Tenant.objects.all()
        if opts["tenant"]:
            tenants = tenants.filter(slug=opts["tenant"])
            if not tenants.exists():
                raise CommandError(f"No tenant '{opts['tenant']}'.")
        notice = identity.notice()  # not drift: every row is there, of the model the build records
        if notice:
            self.stderr.write(notice)
        for upgrade in index_upgrade.notices().values():  # every row of that kind "missing" below: why, what to run
            self.stderr.write(upgrade)
        drift = False
        for tenant in tenants:
            report = reconcile(tenant, repair=opts["repair"])
            report["entities"] = entities = reconcile_entities(tenant, repair=opts["repair"])
            drift |= any(report[k]["missing"] or report[k]["stale"] for k in ("vector", "keyword"))
            drift |= bool(report["late_interaction"].get("missing") or report["late_interaction"].get("stale"))
            drift |= bool(entities["missing"] or entities["stale"] or entities["orphans"])
            self.stdout.write(json.dumps(report))
        if not opts["tenant"]:  # rows of deleted knowledge bases and tenants (a tenant's own are in its report)
            report = reconcile_removed(repair=opts["repair"])
            drift |= any(report[k]["stale"] for k in ("vector", "keyword"))
            self.stdout.write(json.dumps(report))
        if drift and not opts["repair"]:
            raise CommandError("The indexes have drifted from the database; run with --repair (or `reindex`).")
