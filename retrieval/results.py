"""Turn index hits into response items with their sources, straight from the database.

The response shape of a search (shared/DESIGN.md) is made here too (`mrag_response`, `chunks_response`,
`flat_response`): ranked candidates hydrated into items, only what is shown loaded, in one query per
kind. Each item's `score` is its calibrated relevance (retrieval.relevance, the map search/scoring.py's
`relevance` names); the method's own scores stay in `scores`."""

import re
from bisect import bisect_right

from django.db.models import Q

from memory.models import Chunk, Memory, Message
from retrieval.projection import chunk_key, memory_key
from retrieval.relevance import calibrated

RAW_MESSAGES_LIMIT = 50


def _chunk_source(chunk: Chunk) -> dict:
    return {
        "type": "chunk",
        "document_id": chunk.document_id,
        "document_name": chunk.document.filename,
        "chunk_id": chunk.pk,
        "parent_chunk_id": chunk.parent_id,
        **chunk.location,
    }


def assistant_messages(scope, memories: list[Memory]) -> set[tuple[str, str, str]]:
    """(user_id, session_id, message_id) of the memories' first source messages that an AI assistant
    sent (posted with role "assistant"), in one query."""
    said = {(m.user_id, m.session_id, m.source_message_ids[0]) for m in memories if m.source_message_ids}
    if not said:
        return set()
    rows = Message.objects.filter(tenant=scope.tenant, kb_id__in={m.kb_id for m in memories},
                                  user_id__in={s[0] for s in said}, message_id__in={s[2] for s in said},
                                  role__iexact="assistant").values_list("user_id", "session_id", "message_id")
    return {row for row in rows if row in said}


def load_memories(scope, ids: list[str]) -> dict[str, Memory]:
    """Active memories by index key, re-checked against the scope (defence in depth)."""
    pks = [i.split(":", 1)[1] for i in ids if i.startswith("memory:")]
    # By primary key alone, the scope re-checked on the rows: with the scope in the WHERE clause,
    # SQLite (which has no statistics: nothing runs ANALYZE) walks the (tenant, kb, kind, status)
    # index, i.e. every memory of the KB, instead of looking the ids up (50 ms against 0.1 at 100k).
    rows = Memory.objects.filter(pk__in=pks).select_related("kb").prefetch_related("source_chunks__document")
    return {f"memory:{m.pk}": m for m in rows  # memory_key(m.pk): the format this module reads ids in
            if m.tenant_id == scope.tenant.pk and m.kb_id in scope.kb_ids and m.status == Memory.Status.ACTIVE}


def load_chunks(scope, ids: list[str]) -> dict[str, Chunk]:
    pks = [int(i.split(":", 1)[1]) for i in ids if i.startswith("chunk:")]
    rows = Chunk.objects.filter(pk__in=pks, document__kb__tenant=scope.tenant,
                                document__kb_id__in=scope.kb_ids).select_related("document__kb", "parent")
    return {chunk_key(c.pk): c for c in rows}


def texts(ids: list[str], chars: int = 400) -> dict[str, str]:
    """The first `chars` characters of each item's text by index key (memories and chunks), to tell
    its language; the items come from a permission-filtered index call, so no scope is re-checked."""
    from django.db.models.functions import Substr

    out = {}
    memory_pks = [i.split(":", 1)[1] for i in ids if i.startswith("memory:")]
    chunk_pks = [int(i.split(":", 1)[1]) for i in ids if i.startswith("chunk:")]
    for pk, text in Memory.objects.filter(pk__in=memory_pks).values_list("pk", Substr("text", 1, chars)):
        out[memory_key(pk)] = text
    for pk, text in Chunk.objects.filter(pk__in=chunk_pks).values_list("pk", Substr("text", 1, chars)):
        out[chunk_key(pk)] = text
    return out


def memory_sources(memory: Memory) -> list[dict]:
    chunks = sorted(memory.source_chunks.all(), key=lambda c: (c.level != "child", c.ordinal))
    sources = [_chunk_source(c) for c in chunks if c.level == Chunk.Level.CHILD]
    if memory.kind == Memory.Kind.ATOMIC_FACT:
        for source, chunk in zip(sources, (c for c in chunks if c.level == Chunk.Level.CHILD)):
            span = cue_span(chunk, memory.text)
            if span:
                source["start_time"], source["end_time"] = span
    if not sources:
        sources = [_chunk_source(c) for c in chunks]
    # A summary node cites messages of several sessions: metadata.messages names each one's session.
    sessions = memory.metadata.get("messages") if memory.kind == Memory.Kind.SUMMARY else None
    sources += [{"type": "message", "message_id": mid, "session_id": session or None}
                for session, mid in sessions] if sessions else [
        {"type": "message", "message_id": mid, "session_id": memory.session_id} for mid in memory.source_message_ids]
    return sources


# Words (a CJK character is one) for finding a fact's sentence in its chunk.
_WORD = re.compile(r"[\u3400-\u9fff]|[^\W_]+")


def cue_span(chunk: Chunk, fact: str) -> tuple[float, float] | None:
    """(start, end) of the cues of a transcript chunk the fact was taken from, or None.

    A child chunk packs many cues (ingest/chunking.py keeps where each begins); a fact is one
    sentence of them, usually verbatim, sometimes with a topic prefix, a speaker or a pronoun
    replaced. The cue holding most of the fact's word pairs, with the neighbours that hold pairs
    it lacks (a sentence that runs over two cues), is where it was said.
    Linear in the chunk's length: it runs for every fact a response shows."""
    cues = chunk.metadata.get("cues") if isinstance(chunk.metadata, dict) else None
    if not cues or not fact:
        return None
    wanted = [w.casefold() for w in _WORD.findall(fact)]
    pairs = set(zip(wanted, wanted[1:])) or {(w, None) for w in wanted}
    words = [(m.start(), m.group(0).casefold()) for m in _WORD.finditer(chunk.text)]
    offsets = [c[0] for c in cues]
    held: list[set] = [set() for _ in cues]  # the fact's word pairs each cue holds
    for (at, word), (_, after) in zip(words, [*words[1:], (None, None)]):
        pair = (word, after) if (word, after) in pairs else (word, None) if (word, None) in pairs else None
        if pair:
            held[max(0, bisect_right(offsets, at) - 1)].add(pair)
    best = max(range(len(cues)), key=lambda i: len(held[i]))
    if not held[best]:
        return None
    # A neighbour joins only with pairs the cues so far lack: the rest of a sentence cut over two
    # cues, not the same common words ("we can see") said again.
    first = last = best
    covered = set(held[best])
    while first > 0 and held[first - 1] - covered:
        first -= 1
        covered |= held[first]
    while last + 1 < len(cues) and held[last + 1] - covered:
        last += 1
        covered |= held[last]
    start, end = cues[first][1], cues[last][2]
    return (start, end) if start is not None and end is not None else None


def most_relevant_first(sources: list[dict], facts: list[dict]) -> list[dict]:
    """`sources` reordered so that those cited by `facts` (best first) come first, the rest in their order.

    A twelve-turn episode cites twelve messages; the two its best fact came from are the ones to
    read first, and a client that shows or counts only the first few sources sees those."""
    rank = {}
    for fact in facts:
        for source in fact["sources"]:
            rank.setdefault(_source_key(source), len(rank))
    return sorted(sources, key=lambda s: rank.get(_source_key(s), len(rank)))  # stable: the rest keep their order


def _source_key(source: dict) -> tuple:
    return (source.get("type"), source.get("message_id") or source.get("chunk_id"))


def fact_item(memory: Memory, score: float, scores: dict) -> dict:
    return {
        "id": str(memory.pk),
        "atomic_fact": memory.text,
        "topic_name": memory.topic,
        "score": round(score, 6),
        "parent_episode_id": str(memory.parent_id) if memory.parent_id else None,
        "kb": memory.kb.slug,
        "occurred_at": memory.occurred_at.isoformat() if memory.occurred_at else None,
        "user_id": memory.user_id or None,
        "session_id": memory.session_id or None,
        "sources": memory_sources(memory),
        "scores": _round(scores),
    }


def episode_item(memory: Memory, score: float, scores: dict, facts: list[dict]) -> dict:
    """An episode with its best-matching `facts` nested; its sources lead with the ones those facts cite.
    A summary-tree node is shown as one, marked with its kind, level and leaves (the episodes it covers)."""
    tree = {"memory_type": "summary", "level": memory.metadata.get("level"),
            "leaves": memory.metadata.get("leaves", [])} if memory.kind == Memory.Kind.SUMMARY else {}
    return {**tree,
        "id": str(memory.pk),
        "summary": memory.text,
        "topic_name": memory.topic,
        "score": round(score, 6),
        "kb": memory.kb.slug,
        "occurred_at": memory.occurred_at.isoformat() if memory.occurred_at else None,
        "user_id": memory.user_id or None,
        "session_id": memory.session_id or None,
        "atomic_facts": facts,
        "sources": most_relevant_first(memory_sources(memory), facts),
        "scores": _round(scores),
    }


def chunk_item(chunk: Chunk, score: float, scores: dict, *, expand_context: bool) -> dict:
    item = {
        "id": chunk.pk,
        "text": chunk.text,
        "score": round(score, 6),
        "kb": chunk.document.kb.slug,
        "sources": [_chunk_source(chunk)],
        "scores": _round(scores),
    }
    if expand_context and chunk.parent_id:
        item["context"] = {"parent_chunk_id": chunk.parent_id, "text": chunk.parent.text}
    return item


def add_context(items: list[dict]) -> None:
    """Attach each item's parent chunk text (context expansion), one query for all."""
    parent_ids = {s["parent_chunk_id"] for it in items for s in it["sources"] if s.get("parent_chunk_id")}
    parents = Chunk.objects.in_bulk(parent_ids)
    for item in items:
        for source in item["sources"]:
            parent = parents.get(source.get("parent_chunk_id"))
            if parent is not None:
                item["context"] = {"parent_chunk_id": parent.pk, "text": parent.text}
                break


def add_neighbours(items: list[dict], n: int) -> None:
    """Attach the `n` child chunks before and after each item's first source chunk, in reading order.

    Items already carry only what the caller may see; neighbours come from the same document."""
    if n <= 0:
        return
    anchors = {}  # item index -> source chunk id
    for i, item in enumerate(items):
        chunk_id = next((s["chunk_id"] for s in item["sources"] if s.get("type") == "chunk"), None)
        if chunk_id is not None:
            anchors[i] = chunk_id
    # Child chunks only: a parent's ordinal counts parents, not the children around it.
    placed = {pk: (document_id, ordinal) for pk, document_id, ordinal in Chunk.objects.filter(
        pk__in=set(anchors.values()), level=Chunk.Level.CHILD).values_list("pk", "document_id", "ordinal")}
    if not placed:
        return
    wanted = Q()
    for document_id, ordinal in placed.values():
        wanted |= Q(document_id=document_id, ordinal__range=(ordinal - n, ordinal + n))
    around: dict[int, list[Chunk]] = {}
    for chunk in Chunk.objects.filter(wanted, level=Chunk.Level.CHILD).order_by("ordinal"):
        around.setdefault(chunk.document_id, []).append(chunk)
    for i, chunk_id in anchors.items():
        if chunk_id not in placed:
            continue
        document_id, ordinal = placed[chunk_id]
        items[i].setdefault("context", {})["neighbours"] = [
            {"chunk_id": c.pk, "ordinal": c.ordinal, "offset": c.ordinal - ordinal, "text": c.text, **c.location}
            for c in around.get(document_id, []) if abs(c.ordinal - ordinal) <= n and c.pk != chunk_id
        ]


def raw_messages(scope, kb_ids, filters: dict) -> list[dict]:
    """Accumulated chat messages in scope that have not been extracted yet."""
    qs = Message.objects.filter(tenant=scope.tenant, kb_id__in=kb_ids, segment_id__isnull=True)
    for key in ("user_id", "session_id", "group_id", "run_id"):
        if filters.get(key):
            qs = qs.filter(**{key: filters[key]})
    if filters.get("agent_id") != "*":  # as memories: no agent named means turns posted under none
        qs = qs.filter(agent_id=filters.get("agent_id", ""))
    rows = list(qs.order_by("-timestamp", "-id")[:RAW_MESSAGES_LIMIT])
    return [
        {"message_id": m.message_id, "session_id": m.session_id, "user_id": m.user_id,
         "sender": m.sender_name or m.sender_id or m.role, "content": m.content, "timestamp": m.timestamp.isoformat()}
        for m in reversed(rows)
    ]


def _round(scores: dict) -> dict:
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in scores.items()}


# --- the response shape of a search

NESTED_FACTS = 3  # an episode no fact displaced shows its best few facts as supporting detail


def mrag_response(scope, ranked, expander) -> dict:
    """Hybrid's output: facts and the episodes no fact displaced, each episode with its best facts nested."""
    nested_ids = [f.id for c in ranked if c.kind == "episode" and expander
                  for f in expander.expanded.get(c.id, [])[:NESTED_FACTS]]
    memories = load_memories(scope, [c.id for c in ranked] + nested_ids)
    episodes, facts = [], []
    for c in ranked:
        memory = memories.get(c.id)
        if memory is None:
            continue
        if c.kind == "atomic_fact":
            facts.append(fact_item(memory, calibrated("mrag", c.score), c.scores))
        else:
            scored = expander.expanded.get(c.id, []) if expander else []
            nested = [fact_item(memories[f.id], calibrated("mrag", f.score), f.scores)
                      for f in scored[:NESTED_FACTS] if f.id in memories]
            episodes.append(episode_item(memory, calibrated("mrag", c.score), c.scores, nested))
    return {"episodes": episodes, "facts": facts}


def chunks_response(scope, candidates, *, expand_context: bool) -> list[dict]:
    loaded = load_chunks(scope, [c.id for c in candidates])
    return [chunk_item(loaded[c.id], calibrated("chunk", c.score), c.scores, expand_context=expand_context)
            for c in candidates if c.id in loaded]


def flat_response(scope, scored: list[tuple[str, float, dict]], *, expand_context: bool) -> dict:
    """Non-mRAG methods: episode hits with their fact hits nested, chunk hits apart; facts stays empty.

    `scored` is (id, relevance, scores), best first.
    A fact whose episode was not itself a hit is shown under that episode, marked `via_fact`.
    """
    memories = load_memories(scope, [i for i, _, _ in scored])
    loaded_chunks = load_chunks(scope, [i for i, _, _ in scored])
    chunk_items, own_hits, nested, order = [], {}, {}, {}
    for item_id, score, scores in scored:
        if item_id in loaded_chunks:
            chunk_items.append(chunk_item(loaded_chunks[item_id], score, scores, expand_context=expand_context))
            continue
        memory = memories.get(item_id)
        if memory is None:
            continue
        if memory.kind == "atomic_fact" and memory.parent_id:
            key = f"memory:{memory.parent_id}"
            nested.setdefault(key, []).append(fact_item(memory, score, scores))
        else:
            key = item_id
            own_hits[key] = (memory, score, scores)
        order.setdefault(key, score)  # the first (best) hit places the episode
    holders = load_memories(scope, [k for k in order if k not in own_hits])
    episodes = []
    for key, first_score in order.items():
        memory, score, scores = own_hits.get(key) or (holders.get(key), first_score, {"via_fact": True})
        if memory is not None:
            episodes.append(episode_item(memory, score, scores, nested.get(key, [])))
    return {"episodes": episodes, "facts": [], "chunks": chunk_items}
