"""Writes of the entity store: link memories to the entities they name, prune entities nobody names.

`link_memories` runs inside the transaction that writes the memories (document extraction, a chat
flush, an edit), so a memory and its mentions commit together; it replaces the memories' mentions,
so running it again (a re-extraction, `reindex`) changes nothing.
"""

from collections import Counter

from django.db import transaction
from django.db.models import Q

from entities.extraction import Found, find_mentions, mid_sentence_names
from entities.models import Entity, EntityAlias, EntityMention
from entities.resolution import entity_key, nickname_of
from memory.models import Memory

NAMED = frozenset(Entity.NAMED)
TYPES = frozenset(Entity.Type.values)


def link_memories(memories) -> int:
    """Replace the entity mentions of `memories` and of the rest of their groups (an episode and its
    facts: what names count at a sentence's start is decided per group, so a fact edited alone, a
    re-extraction and `reindex` link it the same way); returns how many mentions were written."""
    roots = {m.parent_id or m.pk for m in memories if m.pk}
    if not roots:
        return 0
    written = 0
    with transaction.atomic():
        members = list(Memory.objects.filter(Q(pk__in=roots) | Q(parent_id__in=roots)))
        EntityMention.objects.filter(memory_id__in=[m.pk for m in members]).delete()
        by_tenant: dict[int, list[Memory]] = {}
        for m in members:
            by_tenant.setdefault(m.tenant_id, []).append(m)
        for tenant_id, group in by_tenant.items():
            written += _link_tenant(tenant_id, group)
    return written


def groups(memories: list[Memory]) -> list[list[Memory]]:
    """Memories by group: an episode with its facts (a fact whose episode is not among them alone with its siblings)."""
    out: dict = {}
    for m in memories:
        out.setdefault(m.parent_id or m.pk, []).append(m)
    return list(out.values())


def mentions_of(memories: list[Memory]) -> dict:
    """memory pk -> [(key, Found, mode)] for the memories of one tenant, group by group."""
    out = {}
    for group in groups(memories):
        out.update(_group_mentions(group))
    return out


def _group_mentions(memories: list[Memory]) -> dict:
    speakers = {s for m in memories for s in _speakers(m)}
    known = frozenset({entity_key(s) for s in speakers} | mid_sentence_names(m.text for m in memories))
    people = {entity_key(s): s for s in speakers}
    out = {}
    for m in memories:
        found = [(f, "deterministic") for f in find_mentions(m.text, known)]
        found += [(f, "llm") for f in llm_mentions(m)]
        resolved = []
        for f, mode in found:
            key = entity_key(f.surface)
            if f.type not in ("date", "amount"):
                key = nickname_of(key, people) or key
                if key in people:
                    f = Found(f.surface, "person")
            resolved.append((key, f, mode))
        out[m.pk] = resolved
    return out


def llm_mentions(memory: Memory) -> list[Found]:
    """The entities an LLM extraction listed for this memory (kept in its metadata, so reindex can rebuild them)."""
    out = []
    for item in (memory.metadata or {}).get("entities") or []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            continue
        kind = item.get("type") if item.get("type") in TYPES else "other"
        value = item.get("value") if isinstance(item.get("value"), str) else ""
        out.append(Found(item["name"].strip()[:200], kind, value[:100]))
    return out


def _speakers(memory: Memory) -> list[str]:
    meta = memory.metadata or {}
    names = list(meta.get("participants") or [])
    if meta.get("subject"):
        names.append(meta["subject"])
    return [str(n) for n in names if n]


def _link_tenant(tenant_id: int, memories: list[Memory]) -> int:
    found = mentions_of(memories)
    wanted: dict[tuple[str, str], Counter] = {}  # (kind, key) -> surfaces; kind "named" for every named type
    types: dict[str, Counter] = {}
    values: dict[tuple[str, str], str] = {}
    for pairs in found.values():
        for key, f, _ in pairs:
            if not key:
                continue
            slot = _slot(key, f)
            wanted.setdefault(slot, Counter())[f.surface] += 1
            if f.type in NAMED:
                types.setdefault(key, Counter())[f.type] += 1
            if f.value:
                values[slot] = f.value
    if not wanted:
        return 0
    entities = _entities(tenant_id, wanted, types, values)
    aliases = [EntityAlias(entity=entities[slot], tenant_id=tenant_id, key=entity_key(surface), surface=surface[:200])
               for slot, surfaces in wanted.items() for surface in surfaces]
    EntityAlias.objects.bulk_create(aliases, ignore_conflicts=True, batch_size=500)
    rows = {}
    for m in memories:
        for key, f, mode in found[m.pk]:
            entity = entities.get(_slot(key, f))
            if entity is not None and (entity.pk, m.pk) not in rows:
                rows[(entity.pk, m.pk)] = EntityMention(entity=entity, memory_id=m.pk, tenant_id=tenant_id,
                                                        kb_id=m.kb_id, surface=f.surface[:200], mode=mode)
    EntityMention.objects.bulk_create(rows.values(), ignore_conflicts=True, batch_size=500)
    return len(rows)


def _slot(key: str, f: Found) -> tuple[str, str]:
    if f.type in ("date", "amount"):
        return f.type, f.value or key
    return "named", key


def _entities(tenant_id: int, wanted: dict, types: dict, values: dict) -> dict[tuple[str, str], Entity]:
    """The tenant's entity for each slot, created when new; a named entity of no known type takes the first cue."""
    named_keys = [key for kind, key in wanted if kind == "named"]
    typed = [(kind, key) for kind, key in wanted if kind != "named"]
    found: dict[tuple[str, str], Entity] = {}
    for e in Entity.objects.filter(tenant_id=tenant_id, type__in=NAMED, key__in=named_keys):
        found.setdefault(("named", e.key), e)
    for kind in ("date", "amount"):
        keys = [k for t, k in typed if t == kind]
        for e in Entity.objects.filter(tenant_id=tenant_id, type=kind, key__in=keys):
            found[(kind, e.key)] = e
    new = []
    for slot, surfaces in wanted.items():
        if slot in found:
            entity = found[slot]
            cue = _type_of(types.get(slot[1]))
            if entity.type == Entity.Type.OTHER and cue != Entity.Type.OTHER:
                entity.type = cue  # "Sweden" first seen alone, then "moved to Sweden": a place
                Entity.objects.filter(pk=entity.pk, type=Entity.Type.OTHER).update(type=cue)
            continue
        kind = _type_of(types.get(slot[1])) if slot[0] == "named" else slot[0]
        name = _display(surfaces)
        new.append(Entity(tenant_id=tenant_id, type=kind, key=slot[1], name=name[:200],
                          value=values.get(slot, "")[:100]))
    if new:
        # Another worker may create the same entity meanwhile: the unique key decides, then read back.
        Entity.objects.bulk_create(new, ignore_conflicts=True, batch_size=500)
        for e in Entity.objects.filter(tenant_id=tenant_id, key__in=[e.key for e in new]):
            slot = ("named", e.key) if e.type in NAMED else (e.type, e.key)
            found.setdefault(slot, e)
    return found


def _type_of(counts: Counter | None) -> str:
    if not counts:
        return Entity.Type.OTHER
    cued = [(n, t) for t, n in counts.items() if t and t != Entity.Type.OTHER]
    return max(cued)[1] if cued else Entity.Type.OTHER


def _display(surfaces: Counter) -> str:
    """The most frequent surface form, without a possessive."""
    surface = surfaces.most_common(1)[0][0]
    return surface[:-2] if surface.endswith(("'s", "’s")) else surface


def prune_orphans(tenant_ids) -> int:
    """Delete the entities of these tenants that no memory names any more (after a delete): a deleted
    user's names must not stay behind in the entity store."""
    doomed = Entity.objects.filter(tenant_id__in=list(tenant_ids), mentions__isnull=True)
    return doomed.delete()[0] if tenant_ids else 0
