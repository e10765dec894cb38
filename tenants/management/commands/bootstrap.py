from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from tenants.actions import set_isolation
from tenants.models import ApiKey, KnowledgeBase, Membership, Role, Tenant


class Command(BaseCommand):
    help = "Idempotently create a tenant, a knowledge base and optionally an owner user and an API key."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("--kb", required=True, help="knowledge base slug")
        parser.add_argument("--user", help="owner username (created if missing)")
        parser.add_argument("--password", help="password for a newly created user (an existing user's only with "
                                                "--set-password)")
        parser.add_argument("--set-password", action="store_true",
                            help="set --password on an existing user too (`make run DEMO_PASSWORD=…` passes it)")
        parser.add_argument("--superuser", action="store_true", help="make the user a Django admin superuser")
        parser.add_argument("--isolation", choices=["shared", "exclusive"], default=None)
        parser.add_argument("--api-key", action="store_true", help="issue a read-write API key and print it once")

    @transaction.atomic
    def handle(self, *args, **opts):
        tenant, created = Tenant.objects.get_or_create(
            slug=opts["tenant"], defaults={"name": opts["tenant"].replace("-", " ").title()}
        )
        if opts["isolation"] and tenant.isolation != opts["isolation"]:
            set_isolation(tenant, opts["isolation"], actor="manage.py bootstrap")  # its index rows move on commit
        self.stdout.write(f"tenant {tenant.slug}: {'created' if created else 'exists'}")
        kb, created = KnowledgeBase.objects.get_or_create(
            tenant=tenant, slug=opts["kb"], defaults={"name": opts["kb"].replace("-", " ").title()}
        )
        self.stdout.write(f"knowledge base {kb.slug}: {'created' if created else 'exists'}")
        if opts["user"]:
            User = get_user_model()
            user, created = User.objects.get_or_create(username=opts["user"])
            if created:
                if not opts["password"]:
                    raise CommandError("--password is required to create a new user")
                user.set_password(opts["password"])
            elif opts["password"] and opts["set_password"]:
                user.set_password(opts["password"])
                self.stdout.write(f"user {user.username}: password set to the one given")
            elif opts["password"] and not user.check_password(opts["password"]):
                # Never silently: `make run DEMO_PASSWORD=…` used to print a password that was then refused.
                self.stdout.write(self.style.WARNING(
                    f"user {user.username}: exists, and the password given is NOT its password (not applied: an "
                    "existing user keeps its own). Pass --set-password (make run DEMO_PASSWORD=…) to set it, "
                    f"or run `manage.py changepassword {user.username}`."))
            if opts["superuser"]:
                user.is_staff = user.is_superuser = True
            user.save()
            Membership.objects.update_or_create(user=user, tenant=tenant, defaults={"role": Role.OWNER})
            self.stdout.write(f"user {user.username}: {'created' if created else 'exists'} (owner of {tenant.slug})")
            if opts["password"] and user.check_password(opts["password"]):
                self.stdout.write(f"Sign in as {user.username} / {opts['password']}")
        if opts["api_key"]:
            _, plaintext = ApiKey.issue(tenant, f"bootstrap-{kb.slug}", can_write=True)
            self.stdout.write(f"API key (shown once): {plaintext}")
