"""The entity recall channel of hybrid search: entities the query names → the memories that mention them.

One database query in the request thread, filtered where it reads by the search's permission
filter (tenant, readable KBs, status, user, session, document), like the WHERE of the keyword
index: a memory of a KB the caller may not read never comes back, and no count or score depends
on one. An entity named by a large share of the memories in reach (a chat's two speakers, named
in most of its facts) tells nothing apart, and is left out; the rest weigh by their rarity (idf).
"""

import math
import re
from dataclasses import dataclass, field

from django.conf import settings

from entities.models import Entity, EntityAlias, EntityMention
from entities.resolution import entity_key
from memory.models import Memory

MAX_NGRAM_WORDS = 5
MIN_COMMON = 3  # in a small corpus an entity named 3 times still tells memories apart
MAX_CANDIDATES = 400  # keys looked up per query: a pasted page must not become a huge IN list
_LATIN_WORD = re.compile(r"[^\W_][\w'’\-.&]*")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")


@dataclass
class EntityRecall:
    """Scores in [0, 1] (1 = the best-matching memory of this query), by memory id ("memory:<uuid>")."""

    entities: list[int] = field(default_factory=list)
    facts: dict[str, float] = field(default_factory=dict)
    episodes: dict[str, float] = field(default_factory=dict)  # an episode counts the entities its facts name


def query_keys(query: str) -> list[str]:
    """Every normalised n-gram of the query that could be an entity's key."""
    keys = []
    words = _LATIN_WORD.findall(query)
    for n in range(1, MAX_NGRAM_WORDS + 1):
        keys += [entity_key(" ".join(words[i:i + n])) for i in range(len(words) - n + 1)]
    for run in _CJK_RUN.findall(query):
        keys += [run[i:j] for i in range(len(run)) for j in range(i + 2, min(len(run), i + 8) + 1)]
    return [k for k in dict.fromkeys(keys) if k][:MAX_CANDIDATES]


def named_in(tenant_id: int, query: str) -> list[int]:
    """Ids of the tenant's named entities (not dates or amounts) one of whose aliases the query contains."""
    keys = query_keys(query)
    if not keys:
        return []
    return list(EntityAlias.objects.filter(tenant_id=tenant_id, key__in=keys, entity__type__in=Entity.NAMED)
                .values_list("entity_id", flat=True).distinct())


def recall(query: str, flt) -> EntityRecall:
    """The entity channel for one search; `flt` is its retrieval.backends.base.IndexFilter."""
    entity_ids = named_in(flt.tenant_id, query)
    if not entity_ids or not flt.kb_ids:
        return EntityRecall()
    memories = _in_reach(flt)
    rows = list(EntityMention.objects.filter(tenant_id=flt.tenant_id, kb_id__in=flt.kb_ids, entity_id__in=entity_ids,
                                             memory__in=memories)
                .values_list("entity_id", "memory_id", "memory__kind", "memory__parent_id"))
    if not rows:
        return EntityRecall(entity_ids)
    df: dict[int, int] = {}
    for entity_id, *_ in rows:
        df[entity_id] = df.get(entity_id, 0) + 1
    reach = max(memories.count(), 1)
    common = max(settings.ENTITY_MAX_SHARE * reach, MIN_COMMON)
    weight = {e: math.log(1 + reach / n) for e, n in df.items() if n <= common}
    facts: dict[str, dict[int, float]] = {}
    episodes: dict[str, dict[int, float]] = {}
    for entity_id, memory_id, kind, parent_id in rows:
        w = weight.get(entity_id)
        if not w:
            continue
        if kind == Memory.Kind.EPISODE:
            episodes.setdefault(f"memory:{memory_id}", {})[entity_id] = w
        else:
            facts.setdefault(f"memory:{memory_id}", {})[entity_id] = w
            if parent_id:
                episodes.setdefault(f"memory:{parent_id}", {})[entity_id] = w
    return EntityRecall(entity_ids, _normalised(facts), _normalised(episodes))


def _in_reach(flt):
    memories = Memory.objects.filter(tenant_id=flt.tenant_id, kb_id__in=flt.kb_ids)
    if flt.statuses:
        memories = memories.filter(status__in=flt.statuses)
    if flt.user_id is not None:
        memories = memories.filter(user_id=flt.user_id)
    if flt.session_id is not None:
        memories = memories.filter(session_id=flt.session_id)
    if flt.document_ids:
        memories = memories.filter(document_id__in=flt.document_ids)
    return memories.filter(kind__in=(Memory.Kind.EPISODE, Memory.Kind.ATOMIC_FACT))


def _normalised(weights: dict[str, dict[int, float]]) -> dict[str, float]:
    sums = {k: sum(v.values()) for k, v in weights.items()}
    top = max(sums.values(), default=0.0)
    return {k: s / top for k, s in sums.items()} if top else {}
