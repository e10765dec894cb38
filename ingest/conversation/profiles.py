"""User profiles: what a conversation user's memories say about each person in them, kept up to date.

A profile item is a memory of kind "profile" (no table of its own): one per (user_id, subject,
category, value), with a fixed id, its text a sentence ("Caroline lives in Sweden"), its metadata the
category, value, the facts it was built from and when they were said. Explicit items come from rules
(profile_rules.items_in); implicit ones are recurring interests: a topic touched by at least
INTEREST_MIN_FACTS of a person's facts. A newer value of a single-valued category (location,
occupation, name), or the opposite of a like or dislike, supersedes the older item, with a history row.

`update_profiles` runs inside the MemCell's transaction, on its new facts only: its cost is bounded
by the facts of one MemCell (one query for the items they touch, one count per interest they touch),
never by the size of the profile.
"""

import re
from dataclasses import dataclass, field

from ingest.conversation.profile_rules import INTERESTS, OPPOSITES, SINGLE_VALUED, RuleItem, interests_in, items_in
from memory.models import Memory, MemoryHistory
from ingest.pipeline import memory_uuid

INTEREST_MIN_FACTS = 3  # one or two mentions are small talk; three facts make a recurring interest
INTEREST_SAMPLE = 20  # facts cited by an interest item at most

TEMPLATES = {
    "name": "{s}'s name is {v}", "location": "{s} lives in {v}", "origin": "{s} is from {v}",
    "occupation": "{s} works as {v}", "family": "{s}'s family: {v}", "pet": "{s}'s pet: {v}",
    "possession": "{s} has {v}", "preference": "{s} likes {v}", "dislike": "{s} dislikes {v}",
    "goal": "{s} wants to {v}", "interest": "{s} is interested in {v}",
}


@dataclass
class ProfileChanges:
    written: list[Memory] = field(default_factory=list)  # created or updated items (to index)
    history: list[MemoryHistory] = field(default_factory=list)


def item_id(kb_id: int, user_id: str, subject: str, category: str, key: str):
    return memory_uuid("profile", kb_id, user_id, subject.lower(), category, key)


ZH_TEMPLATES = {
    "name": "{s}的名字是{v}", "location": "{s}住在{v}", "origin": "{s}来自{v}", "occupation": "{s}的职业：{v}",
    "family": "{s}的家人：{v}", "pet": "{s}的宠物：{v}", "possession": "{s}有{v}", "preference": "{s}喜欢{v}",
    "dislike": "{s}不喜欢{v}", "goal": "{s}希望{v}", "interest": "{s}对{v}感兴趣",
}


def item_text(subject: str, category: str, value: str) -> str:
    templates = ZH_TEMPLATES if re.search(r"[\u4e00-\u9fff]", value) else TEMPLATES
    return templates.get(category, "{s}: {v}").format(s=subject, v=value)


def update_profiles(kb, facts: list[Memory], *, actor: str, now) -> ProfileChanges:
    """Fold new facts into their user's profile: create, extend or supersede items. Inside the caller's transaction."""
    changes = ProfileChanges()
    if not facts:
        return changes
    user_id = facts[0].user_id
    names = sorted({f.metadata.get("subject", "") for f in facts} - {""})
    found: list[tuple[RuleItem, Memory, list[str]]] = []
    for fact in facts:
        for item in items_in(fact.text, fact.metadata.get("subject", ""), names):
            found.append((item, fact, [str(fact.pk)]))
    interests = _interests(kb, user_id, facts)
    found += interests
    if not found:
        return changes
    wanted = {item_id(kb.pk, user_id, i.subject, i.category, i.key): (i, f, c) for i, f, c in found}
    subjects = {i.subject for i, _, _ in found}
    # Every item of the subjects touched, for the contradiction check: one query, locked until commit
    # (two flushes of one user never lose each other's citations).
    existing = {m.pk: m for m in Memory.objects.select_for_update().filter(
        tenant_id=kb.tenant_id, kb=kb, user_id=user_id, kind=Memory.Kind.PROFILE,
        metadata__subject__in=list(subjects))}
    touched: dict = {}
    for pk, (item, fact, cites) in wanted.items():
        memory = existing.get(pk)
        when = (fact.occurred_at or now).isoformat()
        if memory is None:
            memory = Memory(
                id=pk, tenant_id=kb.tenant_id, kb=kb, kind=Memory.Kind.PROFILE, user_id=user_id,
                text=item_text(item.subject, item.category, item.value), topic=item.category,
                source_message_ids=list(fact.source_message_ids), occurred_at=fact.occurred_at,
                extraction_mode="deterministic", content_hash="",
                metadata={"subject": item.subject, "category": item.category, "value": item.value,
                          "kind": "implicit" if item.category == "interest" else "explicit",
                          "fact_ids": cites[:INTEREST_SAMPLE], "first_seen": when, "last_seen": when})
            memory.content_hash = Memory.hash_text(memory.text)
            memory._adding = True
            existing[pk] = memory
        else:
            meta = memory.metadata
            meta["fact_ids"] = list(dict.fromkeys([*meta.get("fact_ids", []), *cites]))[-INTEREST_SAMPLE:]
            meta["last_seen"] = max(meta.get("last_seen") or when, when)
            memory.source_message_ids = list(dict.fromkeys([*memory.source_message_ids, *fact.source_message_ids]))
            if memory.status == Memory.Status.SUPERSEDED and when >= (meta.get("superseded_at") or ""):
                _set_status(memory, Memory.Status.ACTIVE, None, actor, now, changes, "stated again")
        touched[pk] = memory
    for pk, memory in list(touched.items()):
        _supersede_contradicted(memory, existing, touched, actor, now, changes)
    adding = [m for m in touched.values() if getattr(m, "_adding", False)]
    Memory.objects.bulk_create(adding)
    for m in adding:
        changes.history.append(MemoryHistory(memory_id=m.pk, tenant_id=m.tenant_id, event=MemoryHistory.Event.ADD,
                                             new_text=m.text, new_status=m.status, actor=actor, created_at=now,
                                             reason=f"profile item from fact {m.metadata['fact_ids'][0]}"[:300]))
    for m in touched.values():
        if not getattr(m, "_adding", False):
            Memory.objects.filter(pk=m.pk).update(metadata=m.metadata, source_message_ids=m.source_message_ids,
                                                  status=m.status, superseded_by=m.superseded_by_id, updated_at=now)
    MemoryHistory.objects.bulk_create(changes.history)
    changes.written = list(touched.values())
    return changes


def _supersede_contradicted(memory: Memory, existing: dict, touched: dict, actor, now, changes) -> None:
    """The older of two contradicting active items gives way to the newer (by the time of their facts)."""
    meta = memory.metadata
    category = meta["category"]
    rivals = [m for m in existing.values() if m.pk != memory.pk and m.status == Memory.Status.ACTIVE
              and m.metadata.get("subject") == meta["subject"]
              and ((category in SINGLE_VALUED and m.metadata.get("category") == category)
                   or (OPPOSITES.get(category) == m.metadata.get("category")
                       and _key(m.metadata.get("value", "")) == _key(meta["value"])))]
    for rival in rivals:
        older, newer = sorted([rival, memory], key=lambda m: m.metadata.get("last_seen") or "")
        if older.status != Memory.Status.ACTIVE:
            continue
        _set_status(older, Memory.Status.SUPERSEDED, newer, actor, now, changes, f"superseded by {newer.text}")
        touched[older.pk] = older


def _set_status(memory: Memory, status: str, by: Memory | None, actor, now, changes, reason: str) -> None:
    if not getattr(memory, "_adding", False):
        changes.history.append(MemoryHistory(memory_id=memory.pk, tenant_id=memory.tenant_id,
                                             event=MemoryHistory.Event.UPDATE, old_text=memory.text,
                                             new_text=memory.text, old_status=memory.status, new_status=status,
                                             actor=actor, reason=reason[:300], created_at=now))
    memory.status, memory.superseded_by = status, by
    memory.metadata["superseded_at"] = now.isoformat() if by else None


def _interests(kb, user_id: str, facts: list[Memory]) -> list[tuple[RuleItem, Memory, list[str]]]:
    """Recurring interests the new facts touch: a topic with at least INTEREST_MIN_FACTS facts of the person."""
    touched: dict[tuple[str, str], list[Memory]] = {}
    for fact in facts:
        subject = fact.metadata.get("subject", "")
        for label in interests_in(fact.text) if subject else ():
            touched.setdefault((subject, label), []).append(fact)
    out = []
    for (subject, label), new in touched.items():
        words = INTERESTS[label]
        earlier = list(Memory.objects.filter(
            tenant_id=kb.tenant_id, kb=kb, user_id=user_id, kind=Memory.Kind.ATOMIC_FACT, status=Memory.Status.ACTIVE,
            metadata__subject=subject, text__iregex=words).exclude(pk__in=[f.pk for f in new])
            .values_list("pk", flat=True)[:INTEREST_SAMPLE])
        if len(earlier) + len(new) < INTEREST_MIN_FACTS:
            continue
        latest = max(new, key=lambda f: f.occurred_at or f.created_at)
        cites = [str(pk) for pk in earlier] + [str(f.pk) for f in new]
        out.append((RuleItem(subject, "interest", label), latest, cites))
    return out


def _key(value: str) -> str:
    return re.sub(r"[\W_]+", " ", value.lower()).strip()
