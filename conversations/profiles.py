"""User profiles: what a conversation user's memories say about each person in them, kept up to date.

A profile item is a memory of kind "profile" (no table of its own): one per (user_id, subject,
category, value), with a fixed id, its text a sentence ("Caroline lives in Sweden"), its metadata the
category, value, the facts it was built from and when they were said. Explicit items come from rules
(profile_rules.items_in); implicit ones are recurring interests: a topic touched by a person's facts in at least
INTEREST_MIN_SESSIONS sessions. A newer value of a single-valued category (location,
occupation, name), or the opposite of a like or dislike, supersedes the older item, with a history row.

`update_profiles` runs inside the MemCell's transaction, on its new facts only: its cost is bounded
by the facts of one MemCell (one query for the items they touch, one count per interest they touch),
never by the size of the profile.

With an LLM configured, `plan_profiles` (outside any transaction) asks the model for the explicit and
implicit items of the new facts (profiles_llm.py); `update_profiles` folds those instead of the rules'
items, the same way (same ids, same supersession), and each item records the mode that created it
(`extraction_mode`). The recurring-interest count runs in both modes: the model sees one flush only.
A failed or unusable reply leaves the rules' items for that flush.

The source of truth wins: `forget_facts` takes deleted (or disabled, or edited) facts out of the items
that cite them, re-counts an interest, drops an item left with no fact and lets the item it had
superseded stand again; profiles_sync.py calls it, and `update_profiles` on an edited fact, after
every delete and edit commits.
"""

import re
from dataclasses import dataclass, field

from django.conf import settings

from conversations.profile_rules import INTERESTS, OPPOSITES, SINGLE_VALUED, RuleItem, interests_in, items_in
from conversations.profiles_llm import MAX_PROMPT_ITEMS, ProposedItem, llm_profile_items
from memory.models import Memory, MemoryHistory
from memory.ids import memory_uuid

# One or two mentions are small talk, and so is a topic of one chat: an interest recurs, in facts of three
# sessions (facts alone, three in two sessions, made "art", "running", "gardening" interests on LoCoMo 0-1).
INTEREST_MIN_SESSIONS = 3
INTEREST_SAMPLE = 20  # facts cited by an interest item at most
INTEREST_SCAN = 300  # a person's facts on a topic read to count its sessions (the newest first)

TEMPLATES = {
    "name": "{s}'s name is {v}", "location": "{s} lives in {v}", "origin": "{s} is from {v}",
    "occupation": "{s} works as {v}", "family": "{s}'s family: {v}", "pet": "{s}'s pet: {v}",
    "possession": "{s} has {v}", "preference": "{s} likes {v}", "dislike": "{s} dislikes {v}",
    "goal": "{s} wants to {v}", "interest": "{s} is interested in {v}", "habit": "{s}'s habit: {v}",
}


@dataclass
class ProfileChanges:
    written: list[Memory] = field(default_factory=list)  # created or updated items (to index)
    history: list[MemoryHistory] = field(default_factory=list)
    dropped: list[Memory] = field(default_factory=list)  # items left with no fact (to delete)


def item_id(kb_id: int, user_id: str, subject: str, category: str, key: str):
    return memory_uuid("profile", kb_id, user_id, subject.lower(), category, key)


ZH_TEMPLATES = {
    "name": "{s}的名字是{v}", "location": "{s}住在{v}", "origin": "{s}来自{v}", "occupation": "{s}的职业：{v}",
    "family": "{s}的家人：{v}", "pet": "{s}的宠物：{v}", "possession": "{s}有{v}", "preference": "{s}喜欢{v}",
    "dislike": "{s}不喜欢{v}", "goal": "{s}希望{v}", "interest": "{s}对{v}感兴趣", "habit": "{s}的习惯：{v}",
}


def item_text(subject: str, category: str, value: str) -> str:
    templates = ZH_TEMPLATES if re.search(r"[\u4e00-\u9fff]", value) else TEMPLATES
    if category == "occupation" and value[:1].isupper():
        return f"{subject} works at {value}"  # an employer ("works at Fabrikam"), not a job title
    return templates.get(category, "{s}: {v}").format(s=subject, v=value)


def plan_profiles(kb, user_id: str, facts: list[tuple[str, str]]) -> list[ProposedItem] | None:
    """The model's items for new facts ((subject, text), in the order update_profiles gets them), or None:
    no LLM configured, or it failed (the rules write the items). Runs outside any transaction."""
    if not settings.LLM_ENABLED or not facts:
        return None
    subjects = sorted({s for s, _ in facts} - {""})
    current = list(Memory.objects.filter(
        tenant_id=kb.tenant_id, kb=kb, user_id=user_id, kind=Memory.Kind.PROFILE, status=Memory.Status.ACTIVE,
        metadata__subject__in=subjects).order_by("-updated_at").values_list("metadata", flat=True)[:MAX_PROMPT_ITEMS])
    return llm_profile_items(facts, [m for m in current if {"subject", "category", "value"} <= set(m)])


def update_profiles(kb, facts: list[Memory], *, actor: str, now,
                    proposed: list[ProposedItem] | None = None) -> ProfileChanges:
    """Fold new facts into their user's profile: create, extend or supersede items. Inside the caller's transaction.

    `proposed` (plan_profiles' answer for these facts, in this order) replaces the rules' explicit items.
    """
    changes = ProfileChanges()
    if not facts:
        return changes
    user_id = facts[0].user_id
    names = sorted({f.metadata.get("subject", "") for f in facts} - {""})
    found: list[tuple[RuleItem, Memory, list[str], str, str]] = []  # item, its latest fact, citations, mode, kind
    if proposed is None:
        for fact in facts:
            for item in items_in(fact.text, fact.metadata.get("subject", ""), names):
                found.append((item, fact, [str(fact.pk)], "deterministic", _kind(item.category)))
    else:
        for p in proposed:
            cited = [facts[n] for n in p.facts if n < len(facts)]
            if cited:
                latest = max(cited, key=lambda f: f.occurred_at or now)
                found.append((p.item, latest, [str(f.pk) for f in cited], "llm", p.kind))
    found += [(i, f, c, "deterministic", "implicit") for i, f, c in _interests(kb, user_id, facts, names)]
    if not found:
        return changes
    wanted = {}
    for item, fact, cites, mode, kind in found:
        pk = item_id(kb.pk, user_id, item.subject, item.category, item.key)
        if pk in wanted:  # the model and the counter name one interest: one item, every citation
            cites = list(dict.fromkeys([*wanted[pk][2], *cites]))
            item, fact, _, mode, kind = wanted[pk]
        wanted[pk] = (item, fact, cites, mode, kind)
    subjects = {i.subject for i, *_ in found}
    # Every item of the subjects touched, for the contradiction check: one query, locked until commit
    # (two flushes of one user never lose each other's citations).
    existing = {m.pk: m for m in Memory.objects.select_for_update().filter(
        tenant_id=kb.tenant_id, kb=kb, user_id=user_id, kind=Memory.Kind.PROFILE,
        metadata__subject__in=list(subjects))}
    touched: dict = {}
    for pk, (item, fact, cites, mode, kind) in wanted.items():
        memory = existing.get(pk)
        when = (fact.occurred_at or now).isoformat()
        if memory is None:
            memory = Memory(
                id=pk, tenant_id=kb.tenant_id, kb=kb, kind=Memory.Kind.PROFILE, user_id=user_id,
                text=item_text(item.subject, item.category, item.value), topic=item.category,
                source_message_ids=list(fact.source_message_ids), occurred_at=fact.occurred_at,
                extraction_mode=mode, content_hash="",
                metadata={"subject": item.subject, "category": item.category, "value": item.value,
                          "kind": kind, "fact_ids": cites[:INTEREST_SAMPLE], "first_seen": when, "last_seen": when})
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


def _interests(kb, user_id: str, facts: list[Memory], names: list[str]) -> list[tuple[RuleItem, Memory, list[str]]]:
    """Recurring interests the new facts touch: a topic of the person's facts in INTEREST_MIN_SESSIONS sessions."""
    touched: dict[tuple[str, str], list[Memory]] = {}
    for fact in facts:
        subject = fact.metadata.get("subject", "")
        for label in interests_in(fact.text, subject, names) if subject else ():
            touched.setdefault((subject, label), []).append(fact)
    out = []
    for (subject, label), new in touched.items():
        earlier = _topic_facts(kb.tenant_id, kb.pk, user_id, subject, label, names, {str(f.pk) for f in new})
        cites = _sample(earlier + [(str(f.pk), f.session_id) for f in new])
        if not _recurring(cites):
            continue
        latest = max(new, key=lambda f: f.occurred_at or f.created_at)
        out.append((RuleItem(subject, "interest", label), latest, [pk for pk, _ in cites]))
    return out


def _topic_facts(tenant_id, kb_id, user_id: str, subject: str, label: str, names, exclude: set[str]) -> list[tuple]:
    """(id, session) of the person's active facts on the topic, as interests_in reads them (the database's
    regex finds the candidates; a fact naming another participant does not count)."""
    rows = Memory.objects.filter(
        tenant_id=tenant_id, kb_id=kb_id, user_id=user_id, kind=Memory.Kind.ATOMIC_FACT, status=Memory.Status.ACTIVE,
        metadata__subject=subject, text__iregex=INTERESTS[label]).exclude(pk__in=exclude).order_by("-occurred_at")
    return [(str(pk), session) for pk, session, text in rows.values_list("pk", "session_id", "text")[:INTEREST_SCAN]
            if label in interests_in(text, subject, names)]


def _sample(cited: list[tuple]) -> list[tuple]:
    """At most INTEREST_SAMPLE (id, session) citations, one per session first: the sessions are the evidence."""
    first, rest, seen = [], [], set()
    for pk, session in cited:
        (rest if (session or pk) in seen else first).append((pk, session))
        seen.add(session or pk)
    return (first + rest)[:INTEREST_SAMPLE]


def _recurring(cited: list[tuple]) -> bool:
    return len({session or pk for pk, session in cited}) >= INTEREST_MIN_SESSIONS


def _kind(category: str) -> str:
    return "implicit" if category == "interest" else "explicit"


def forget_facts(tenant_id: int, kb_id: int, user_id: str, gone: set[str] | None, *, actor: str, now,
                 keep: set = frozenset()) -> ProfileChanges:
    """Take facts out of the user's profile items that cite them. Inside the caller's transaction.

    `gone`: ids of deleted, disabled or edited facts; None: every cited fact that no longer exists (a
    session's delete). Items in `keep` (re-derived from an edited fact) keep their citation. An item
    keeps what its other facts say (messages, times); an interest is counted again; an item left with
    no fact goes to `dropped`, and an item it had superseded stands again unless another still wins.
    Cost: one query for the user's items, one for their remaining facts, one count per interest hit.
    """
    changes = ProfileChanges()
    items = {m.pk: m for m in Memory.objects.select_for_update().filter(
        tenant_id=tenant_id, kb_id=kb_id, user_id=user_id, kind=Memory.Kind.PROFILE)}
    if gone is None:
        cited = {f for m in items.values() for f in m.metadata.get("fact_ids", [])}
        alive = {str(pk) for pk in Memory.objects.filter(pk__in=cited).values_list("pk", flat=True)}
        gone = cited - alive
    gone = {str(g) for g in gone}
    hit = [m for m in items.values() if m.pk not in keep and gone & set(m.metadata.get("fact_ids", []))]
    if not hit:
        return changes
    names = sorted({m.metadata.get("subject", "") for m in items.values()} - {""})
    for m in hit:
        m.metadata["fact_ids"] = [f for f in m.metadata.get("fact_ids", []) if f not in gone]
        if _counted(m):  # a sample: count the sessions again from the facts that are left
            m.metadata["fact_ids"] = _interest_facts(m, gone, names)
    facts = {str(f.pk): f for f in Memory.objects.filter(pk__in={f for m in hit for f in m.metadata["fact_ids"]})
             .only("id", "occurred_at", "source_message_ids", "session_id")}
    for m in hit:
        left = [facts[f] for f in m.metadata["fact_ids"] if f in facts]
        if not left or (_counted(m) and not _recurring([(str(f.pk), f.session_id) for f in left])):
            changes.dropped.append(m)
            continue
        m.metadata["fact_ids"] = [str(f.pk) for f in left]
        times = sorted(f.occurred_at.isoformat() for f in left if f.occurred_at)
        if times:
            m.metadata["first_seen"], m.metadata["last_seen"] = times[0], times[-1]
        m.source_message_ids = list(dict.fromkeys(s for f in left for s in f.source_message_ids))
        changes.written.append(m)
    dropped = {m.pk for m in changes.dropped}
    standing = {pk: m for pk, m in items.items() if pk not in dropped}
    touched = {m.pk: m for m in changes.written}
    for m in standing.values():
        if m.status == Memory.Status.SUPERSEDED and m.superseded_by_id in dropped:
            _set_status(m, Memory.Status.ACTIVE, None, actor, now, changes, "the item that superseded it lost its facts")
            touched[m.pk] = m
            _supersede_contradicted(m, standing, touched, actor, now, changes)
    for m in touched.values():
        Memory.objects.filter(pk=m.pk).update(metadata=m.metadata, source_message_ids=m.source_message_ids,
                                              status=m.status, superseded_by=m.superseded_by_id, updated_at=now)
    MemoryHistory.objects.bulk_create(changes.history)
    changes.written = list(touched.values())
    return changes


def _counted(item: Memory) -> bool:
    """An interest the rules counted holds while its facts span INTEREST_MIN_SESSIONS sessions; the model's on one."""
    return item.metadata.get("category") == "interest" and item.extraction_mode != "llm"


def _interest_facts(item: Memory, gone: set[str], names: list[str]) -> list[str]:
    """The active facts of the item's person on its topic, now (an interest's citations are a sample)."""
    label = item.metadata.get("value", "")
    if label not in INTERESTS:
        return item.metadata["fact_ids"]
    found = _topic_facts(item.tenant_id, item.kb_id, item.user_id, item.metadata.get("subject", ""), label, names,
                         set(gone))
    return [pk for pk, _ in _sample(found)]


def _key(value: str) -> str:
    return re.sub(r"[\W_]+", " ", value.lower()).strip()
