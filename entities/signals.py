"""The entity store follows the memories it links: an edited text is linked again, a delete prunes orphans.

Receivers of the memory model's own signals, so every write and delete path (API, console, admin,
`manage.py delete`, cascades of a document, KB or tenant) is covered without each calling us.
"""

import threading

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from entities.actions import link_memories, prune_orphans
from memory.models import Memory


@receiver(post_save, sender=Memory, dispatch_uid="entities-relink-edited")
def relink_edited(sender, instance: Memory, created: bool, update_fields=None, **kwargs):
    # New memories are linked in bulk by the action that writes them; here only a changed text.
    if created or (update_fields is not None and "text" not in update_fields):
        return
    link_memories([instance])


@receiver(post_delete, sender=Memory, dispatch_uid="entities-prune-on-delete")
def prune_after_delete(sender, instance: Memory, **kwargs):
    # One prune per tenant per commit, however many memories the transaction deletes (a KB's
    # thousands): each delete notes its tenant and queues a callback; the commit's first callback
    # prunes every tenant noted, the others find nothing left to do. Noted per thread, as Django's
    # connections (and so their commits and callbacks) are. A rolled-back transaction's tenants stay
    # noted and are pruned at this thread's next commit: once more than needed, never less.
    _noted_tenants().add(instance.tenant_id)
    transaction.on_commit(_prune_noted)


_noted = threading.local()


def _noted_tenants() -> set[int]:
    if not hasattr(_noted, "tenants"):
        _noted.tenants = set()
    return _noted.tenants


def _prune_noted():
    tenants = _noted_tenants()
    if tenants:
        pending = sorted(tenants)
        tenants.clear()
        prune_orphans(pending)
