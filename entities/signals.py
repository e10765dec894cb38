"""The entity store follows the memories it links: an edited text is linked again, a delete prunes orphans.

Receivers of the memory model's own signals, so every write and delete path (API, console, admin,
`manage.py delete`, cascades of a document, KB or tenant) is covered without each calling us.
"""

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
    # One prune per tenant per transaction, however many memories it deletes (a KB's thousands):
    # a callback already queued on this connection for the tenant is enough. A rolled-back
    # transaction drops its callbacks with it.
    queued = transaction.get_connection().run_on_commit
    if any(getattr(fn, "entity_tenant", None) == instance.tenant_id and not fn.done for _, fn, _ in queued):
        return
    transaction.on_commit(_pruner(instance.tenant_id))


def _pruner(tenant_id: int):
    def prune():
        prune.done = True
        prune_orphans([tenant_id])

    prune.entity_tenant, prune.done = tenant_id, False
    return prune
