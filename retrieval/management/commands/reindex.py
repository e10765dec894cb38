import json

from django.core.management.base import BaseCommand, CommandError

from django.core.exceptions import ImproperlyConfigured

from entities.projection import rebuild_entities
from retrieval.builds import ReindexRunning
from retrieval.projection import reindex
from tenants.models import KnowledgeBase, Tenant


class Command(BaseCommand):
    help = ("Rebuild the vector and keyword index projections (and the entity projection) from the database, online: everything goes into a "
            "new build that replaces the live one when complete (one tenant or KB is rewritten in place).")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="only this tenant (slug)")
        parser.add_argument("--kb", help="only this knowledge base (slug; needs --tenant)")
        parser.add_argument("--embedder", help="embed the new build with this LOCI_EMBEDDERS alias (e.g. next); "
                                               "default: the live build's")

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
        try:
            result = reindex(tenant=tenant, kb=kb, embedder_alias=opts["embedder"],
                             log_progress=lambda msg: self.stderr.write(msg))
        except (ReindexRunning, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from exc
        # The entity projection has no build of its own (it does not depend on the embedder): relinked in place.
        result["entities"] = [rebuild_entities(t, kb) for t in ([tenant] if tenant else Tenant.objects.all())]
        self.stdout.write(json.dumps(result))
