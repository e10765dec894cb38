"""Profiles follow their facts: a deleted, disabled or edited fact re-derives the profile items that cite it.

Receivers of the memory model's own signals (connected in ConversationsConfig.ready), so every path is
covered without each calling us: the API's memory and session deletes, PATCH, the Django admin,
`manage.py delete`, an episode's delete taking its facts along. The
receivers only note ids (per thread, as Django's connections and their commits are); once the
transaction commits, the first of its callbacks re-derives each
user's profile in a transaction of its own (profiles.forget_facts, and update_profiles for an edited
or re-enabled fact, asking the LLM first when one is configured), then indexes what changed and
deletes, with a history row, the items left with no fact. It reads the database, not the instances,
so running it twice changes nothing more. Extraction's own writes (bulk_create, update, a fact
superseded by a newer one) send no such signal and are handled where they happen.
"""

import logging
import threading

from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from common.llm_scope import llm_scope
from entities.actions import link_memories
from conversations.profiles import forget_facts, plan_profiles, update_profiles
from memory.curation import delete_memories
from memory.models import Memory
from retrieval.projection import index_memories
from tenants.models import KnowledgeBase

log = logging.getLogger(__name__)

ACTOR = "profile-sync"


def fact_deleted(sender, instance: Memory, **kwargs):
    if instance.kind != Memory.Kind.ATOMIC_FACT or not instance.user_id:
        return
    key = (instance.tenant_id, instance.kb_id, instance.user_id)
    _note(lambda notes: notes.deleted.setdefault(key, set()).add(str(instance.pk)))


def fact_saved(sender, instance: Memory, created: bool, update_fields=None, **kwargs):
    # An edit (text) or a status set by a curator; a fact superseded by extraction keeps its items,
    # which extraction supersedes itself.
    if created or instance.kind != Memory.Kind.ATOMIC_FACT or not instance.user_id:
        return
    if update_fields is not None and not {"text", "status"} & set(update_fields):
        return
    if instance.status == Memory.Status.SUPERSEDED:
        return
    _note(lambda notes: notes.changed.add(str(instance.pk)))


class _Notes:
    """The facts deleted and changed since this thread's last sync."""

    def __init__(self):
        self.deleted: dict[tuple[int, int, str], set[str]] = {}
        self.changed: set[str] = set()


_noted = threading.local()


def _notes() -> _Notes:
    if not hasattr(_noted, "notes"):
        _noted.notes = _Notes()
    return _noted.notes


def _note(add) -> None:
    """Note a change; inside a transaction, sync once it commits, else (already committed) now.

    Every note queues a callback (public API only: Django's queue of callbacks is its own); the
    commit's first callback syncs every note, the others find nothing. A rolled-back transaction's
    notes stay and are synced at this thread's next commit: once more than needed, never less, and
    a sync reads the database, so it changes nothing that did not change."""
    add(_notes())
    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(_sync_noted)
    else:
        _sync_noted()


def _sync_noted() -> None:
    notes = _notes()
    if not notes.deleted and not notes.changed:
        return
    _noted.notes = _Notes()  # a sync's own writes note nothing here (profile items are not facts)
    try:
        sync_profiles(notes.deleted, notes.changed)
    except Exception:  # the delete or edit itself committed; the next one touching these items repairs them
        log.exception("re-deriving profiles after a delete or edit failed")


def sync_profiles(deleted: dict[tuple[int, int, str], set[str]], changed: set[str]) -> None:
    """Re-derive the profiles these deleted and changed facts bear on. Idempotent.

    A "deleted" fact the database still holds was not deleted (its transaction rolled back after
    the note): its items keep it."""
    noted = {i for ids in deleted.values() for i in ids}
    alive = {str(pk) for pk in Memory.objects.filter(pk__in=noted).values_list("pk", flat=True)} if noted else set()
    deleted = {key: ids - alive for key, ids in deleted.items() if ids - alive}
    facts = list(Memory.objects.filter(pk__in=changed, kind=Memory.Kind.ATOMIC_FACT).select_related("kb"))
    groups: dict[tuple[int, int, str], list[Memory]] = {}
    for fact in facts:
        groups.setdefault((fact.tenant_id, fact.kb_id, fact.user_id), []).append(fact)
    live_kbs = {kb.pk: kb for kb in KnowledgeBase.objects.filter(pk__in={k for _, k, _ in {*deleted, *groups}})}
    for key in {*deleted, *groups}:
        tenant_id, kb_id, user_id = key
        kb = live_kbs.get(kb_id)
        if kb is None:
            continue  # the KB went with its profiles
        edited = groups.get(key, [])
        active = [f for f in edited if f.status == Memory.Status.ACTIVE]
        # The model is asked before the transaction, as a flush does, and within a flush's deadline, its
        # tokens the tenant's (an edit's profile call had neither: issue 37).
        with llm_scope(seconds=settings.LLM_FLUSH_DEADLINE_SECONDS, tenant_id=tenant_id):
            proposed = plan_profiles(kb, user_id, [(f.metadata.get("subject", ""), f.text) for f in active])
        _sync_user(kb, user_id, deleted.get(key, set()), edited, active, proposed)


def _sync_user(kb, user_id: str, deleted: set[str], edited: list[Memory], active: list[Memory], proposed) -> None:
    now = timezone.now()
    with transaction.atomic():
        folded = update_profiles(kb, active, actor=ACTOR, now=now, proposed=proposed)
        keep = {m.pk for m in folded.written if set(m.metadata.get("fact_ids", [])) & {str(f.pk) for f in active}}
        gone = deleted | {str(f.pk) for f in edited}
        forgot = forget_facts(kb.tenant_id, kb.pk, user_id, gone, actor=ACTOR, now=now, keep=keep)
        # The index rows hold an item's text and status, not its citations: only new items and
        # changed statuses (each has a history row) are indexed again.
        moved = {h.memory_id for h in [*folded.history, *forgot.history]} - {d.pk for d in forgot.dropped}
        written = {m.pk: m for m in [*folded.written, *forgot.written] if m.pk in moved}
        link_memories([m for m in folded.written if getattr(m, "_adding", False)])
        if forgot.dropped:
            delete_memories(forgot.dropped, actor=ACTOR, reason="profile item: every fact it cited is gone")
        if written:
            transaction.on_commit(lambda: index_memories(list(written.values())))


def connect() -> None:
    post_delete.connect(fact_deleted, sender=Memory, dispatch_uid="conversations.profiles-fact-deleted")
    post_save.connect(fact_saved, sender=Memory, dispatch_uid="conversations.profiles-fact-saved")
