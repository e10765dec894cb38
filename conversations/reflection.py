"""Reflection: a background pass over one user's (and one agent's) conversation memory, bounded in time.

For each scope (tenant, KB, user_id, agent_id) holding active conversation memories, in order:
1. merge near-duplicate facts: active facts with the same normalised text, or with cosine at least
   MERGE_COSINE that consolidation.near_duplicates also calls the same statement, are folded into
   the earliest: it gains their citations, they become `superseded` by it (history rows on both).
   A fact whose text a person edited is never superseded (it may be the one kept);
2. refresh the scope's agent skills from their clusters (skills.refresh_skill: a pure function of
   the cases and the feedback, so nothing moves when nothing changed);
3. expire foresight whose window ended: `disabled`, with a history row naming the window;
4. with rebuild_profiles (manage.py reflect --all): re-derive the user's profile from every active
   fact (profiles_sync.sync_profiles), as after a crash between a commit and its re-derivation.
Nothing is deleted: merged facts and expired foresight stay in the database and in the history.
Running it again changes nothing. A pass stops between scopes once its time budget is spent and
says which scopes it did not reach.
"""

import logging
import time
from dataclasses import dataclass, field
from datetime import timezone as dt_timezone

import numpy as np
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from conversations.consolidation import near_duplicates
from conversations.profiles_sync import sync_profiles
from conversations.skills import refresh_skill
from memory.models import CaseCluster, Memory, MemoryHistory
from retrieval.embeddings import embedder
from retrieval.projection import index_memories

log = logging.getLogger(__name__)

ACTOR = "reflection"
MERGE_COSINE = 0.92
MAX_FACTS_COMPARED = 2000  # per scope: the newest ones; an n² similarity of more is for a bigger pass


@dataclass
class ReflectionReport:
    scopes: int = 0
    merged: int = 0
    skills_refreshed: int = 0
    foresight_expired: int = 0
    profiles_rebuilt: int = 0
    not_reached: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"scopes": self.scopes, "merged_facts": self.merged, "skills_refreshed": self.skills_refreshed,
                "foresight_expired": self.foresight_expired, "profiles_rebuilt": self.profiles_rebuilt,
                "complete": not self.not_reached, "not_reached": self.not_reached[:50]}


def scopes(tenant_id: int | None = None, user_id: str | None = None, agent_id: str | None = None) -> list[tuple]:
    """(tenant_id, kb_id, user_id, agent_id) of every scope with active conversation memories."""
    qs = Memory.objects.filter(document__isnull=True, status=Memory.Status.ACTIVE).exclude(user_id="")
    if tenant_id is not None:
        qs = qs.filter(tenant_id=tenant_id)
    if user_id is not None:
        qs = qs.filter(user_id=user_id)
    if agent_id is not None:
        qs = qs.filter(agent_id=agent_id)
    return list(qs.values_list("tenant_id", "kb_id", "user_id", "agent_id").distinct()
                .order_by("tenant_id", "kb_id", "user_id", "agent_id"))


def reflect(*, tenant_id: int | None = None, user_id: str | None = None, agent_id: str | None = None,
            budget_seconds: float = 60.0, rebuild_profiles: bool = False) -> ReflectionReport:
    report = ReflectionReport()
    started = time.monotonic()
    todo = scopes(tenant_id, user_id, agent_id)
    for n, scope in enumerate(todo):
        if time.monotonic() - started > budget_seconds:
            report.not_reached = [dict(zip(("tenant_id", "kb_id", "user_id", "agent_id"), s)) for s in todo[n:]]
            break
        reflect_scope(*scope, report=report, rebuild_profiles=rebuild_profiles)
        report.scopes += 1
    return report


def reflect_scope(tenant_id: int, kb_id: int, user_id: str, agent_id: str, *, report: ReflectionReport,
                  rebuild_profiles: bool = False) -> None:
    report.merged += merge_duplicate_facts(tenant_id, kb_id, user_id, agent_id)
    for cluster in CaseCluster.objects.filter(tenant_id=tenant_id, kb_id=kb_id, user_id=user_id, agent_id=agent_id):
        before = Memory.objects.filter(pk=cluster.skill_id).values_list("text", "metadata").first()
        with transaction.atomic():
            skill = refresh_skill(cluster, actor=ACTOR, reason="reflection: refreshed from its cases")
        if skill is not None and (skill.text, skill.metadata) != before:
            report.skills_refreshed += 1
    report.foresight_expired += expire_foresight(tenant_id, kb_id, user_id, agent_id)
    if rebuild_profiles and not agent_id:  # profiles are the user's, not an agent's
        facts = set(Memory.objects.filter(tenant_id=tenant_id, kb_id=kb_id, user_id=user_id, agent_id="",
                                          kind=Memory.Kind.ATOMIC_FACT, status=Memory.Status.ACTIVE)
                    .values_list("pk", flat=True))
        if facts:
            sync_profiles({}, {str(pk) for pk in facts})
            report.profiles_rebuilt += 1


def _edited_by_a_person(pks) -> set:
    return set(MemoryHistory.objects.filter(memory_id__in=pks, event=MemoryHistory.Event.UPDATE)
               .exclude(old_text=F("new_text")).exclude(actor=ACTOR).values_list("memory_id", flat=True))


def merge_duplicate_facts(tenant_id: int, kb_id: int, user_id: str, agent_id: str) -> int:
    facts = list(Memory.objects.filter(tenant_id=tenant_id, kb_id=kb_id, user_id=user_id, agent_id=agent_id,
                                       kind=Memory.Kind.ATOMIC_FACT, status=Memory.Status.ACTIVE,
                                       document__isnull=True).order_by("-created_at", "-pk")[:MAX_FACTS_COMPARED])
    if len(facts) < 2:
        return 0
    facts.sort(key=lambda f: (f.created_at, str(f.pk)))  # the earliest is kept
    edited = _edited_by_a_person([f.pk for f in facts])
    vectors = np.asarray(embedder().embed_documents([f.text for f in facts]), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)
    similar = vectors @ vectors.T
    keeper_of: dict[int, int] = {}
    for j in range(1, len(facts)):
        if facts[j].pk in edited or (facts[j].metadata or {}).get("note"):
            continue
        for i in range(j):
            if i in keeper_of or (facts[i].metadata or {}).get("note"):
                continue
            same = facts[i].content_hash == facts[j].content_hash or (
                similar[i, j] >= MERGE_COSINE and near_duplicates(
                    facts[j].text, facts[i].text, (facts[j].metadata or {}).get("subject", ""),
                    (facts[i].metadata or {}).get("subject", "")))
            if same:
                keeper_of[j] = i
                break
    if not keeper_of:
        return 0
    now = timezone.now()
    changed = []
    with transaction.atomic():
        for j, i in keeper_of.items():
            keeper, merged = facts[i], facts[j]
            if Memory.objects.filter(pk=merged.pk, status=Memory.Status.ACTIVE).update(
                    status=Memory.Status.SUPERSEDED, superseded_by=keeper, updated_at=now) != 1:
                continue  # changed meanwhile: the next pass sees it
            keeper.source_message_ids = list(dict.fromkeys([*keeper.source_message_ids, *merged.source_message_ids]))
            Memory.objects.filter(pk=keeper.pk).update(source_message_ids=keeper.source_message_ids, updated_at=now)
            merged.status = Memory.Status.SUPERSEDED
            MemoryHistory.objects.bulk_create([
                MemoryHistory(memory_id=merged.pk, tenant_id=tenant_id, event=MemoryHistory.Event.UPDATE,
                              old_text=merged.text, new_text=merged.text, old_status=Memory.Status.ACTIVE,
                              new_status=Memory.Status.SUPERSEDED, actor=ACTOR, created_at=now,
                              reason=f"reflection: merged into {keeper.pk} (near-duplicate)"[:300]),
                MemoryHistory(memory_id=keeper.pk, tenant_id=tenant_id, event=MemoryHistory.Event.UPDATE,
                              old_text=keeper.text, new_text=keeper.text, old_status=keeper.status,
                              new_status=keeper.status, actor=ACTOR, created_at=now,
                              reason=f"reflection: absorbed {merged.pk}: {merged.text}"[:300]),
            ])
            changed.append(merged)
        transaction.on_commit(lambda: index_memories(changed))
    return len(changed)


def expire_foresight(tenant_id: int, kb_id: int, user_id: str, agent_id: str) -> int:
    now = timezone.now().astimezone(dt_timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    ended = [m for m in Memory.objects.filter(tenant_id=tenant_id, kb_id=kb_id, user_id=user_id, agent_id=agent_id,
                                              kind=Memory.Kind.FORESIGHT, status=Memory.Status.ACTIVE)
             if (m.metadata or {}).get("valid_until") and m.metadata["valid_until"] <= now]
    if not ended:
        return 0
    stamp = timezone.now()
    with transaction.atomic():
        Memory.objects.filter(pk__in=[m.pk for m in ended], status=Memory.Status.ACTIVE).update(
            status=Memory.Status.DISABLED, updated_at=stamp)
        MemoryHistory.objects.bulk_create([
            MemoryHistory(memory_id=m.pk, tenant_id=tenant_id, event=MemoryHistory.Event.UPDATE, old_text=m.text,
                          new_text=m.text, old_status=Memory.Status.ACTIVE, new_status=Memory.Status.DISABLED,
                          actor=ACTOR, created_at=stamp,
                          reason=f"reflection: foresight window ended {m.metadata['valid_until']}"[:300])
            for m in ended])
        for m in ended:
            m.status = Memory.Status.DISABLED
        transaction.on_commit(lambda: index_memories(ended))
    return len(ended)
