"""Conversation memory writes: accumulate chat turns, extract MemCells into memories (deletes: memory/curation.py).

Every action takes the caller's scope and the knowledge base explicitly. Segmentation and
extraction (which may call an LLM) run outside any transaction; each MemCell is then written in
its own short transaction that first claims its messages with a conditional update, so two
concurrent flushes of one session never extract the same turns twice, and a failure part-way
leaves the finished MemCells written and the rest still pending for the next flush. Indexes are
updated on commit.
"""

import hashlib
import json
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from common.llm_scope import llm_scope
from entities.actions import link_memories
from conversations.agent_cases import agent_case_memories, is_tool_message
from conversations.agent_cases_llm import plan_case
from conversations.boundaries import boundary_detector
from conversations.consolidation import FactPlan, Recent, plan_facts
from conversations.foresight import foresight_memories, plan_foresight
from conversations.group_episodes import personal_episodes
from conversations.profiles import plan_profiles, update_profiles
from conversations.segmentation import Turn, segment_turns
from conversations.skills import cluster_cases
from extraction import extractor
from extraction.base import ExtractionUnit, Passage, llm_entities
from extraction.dates import dated
from memory.ids import memory_uuid
from memory.curation import update_memory_text
from memory.models import Memory, MemoryHistory, Message
from retrieval import summary_tree
from retrieval.embeddings import embedder
from retrieval.projection import index_memories
from retrieval.text import tokenize
from tenants.access import Scope
from tenants.models import KnowledgeBase

log = logging.getLogger(__name__)

# The KB conversation memories go to when a request names none (see `conversation_kb`).
CONVERSATIONS_KB = "conversations"
# A fact with fewer distinct content terms (stop words and speaker names aside) is chat filler.
MIN_FACT_TERMS = 1
# Words of a model-free episode narrative (see `narrative`): a 12-turn MemCell's statements. With
# 12-turn MemCells (boundaries.MAX_SEGMENT_MESSAGES) 400 keeps the whole MemCell
# (see bench/RESULTS.md, "Design notes moved from code comments", EPISODE_WORDS).
EPISODE_WORDS = 400


class ConversationError(ValueError):
    """A request the caller must fix (HTTP 400)."""


@dataclass
class ExtractionCounts:
    segments: int = 0
    episodes: int = 0
    facts: int = 0
    merged: int = 0  # extracted facts folded into an existing duplicate
    superseded: int = 0  # older facts marked superseded
    forced: int = 0  # MemCells closed by a hard limit

    def as_dict(self) -> dict:
        return {"segments": self.segments, "episodes": self.episodes, "facts": self.facts,
                "merged_duplicates": self.merged, "superseded": self.superseded}


def conversation_kb(scope: Scope, slug: str | None) -> KnowledgeBase:
    """The named KB; else one called "conversations"; else the caller's first KB by slug.

    Nothing is created on demand: a KB made here would be invisible to a KB-limited API key.
    """
    kbs = KnowledgeBase.objects.filter(tenant=scope.tenant, id__in=scope.kb_ids).order_by("slug")
    if slug:
        kb = kbs.filter(slug=slug).first()
        if kb is None:
            raise ConversationError(f"Unknown knowledge base '{slug}'.")
        return kb
    kb = kbs.filter(slug=CONVERSATIONS_KB).first() or kbs.first()
    if kb is None:
        raise ConversationError("The caller may use no knowledge base; create one (e.g. 'conversations') first.")
    return kb


def stable_message_id(session_id: str, timestamp, sender: str, content: str) -> str:
    """An id for a message posted without one: the same message posted twice gets the same id."""
    raw = "\x1f".join([session_id, timestamp.isoformat(), sender, content])
    return "gen-" + hashlib.sha256(raw.encode()).hexdigest()[:32]


def speaker(message: Message) -> str:
    return message.sender_name or message.sender_id or message.role


def turn_for(message: Message) -> Turn:
    return Turn(message.message_id, speaker(message), message.content, message.timestamp, message.session_id,
                (message.role or "").lower())


def pending_messages(kb: KnowledgeBase, user_id: str, session_id: str):
    return Message.objects.filter(kb=kb, user_id=user_id, session_id=session_id, segment_id__isnull=True)


def store_messages(scope: Scope, kb: KnowledgeBase, *, user_id: str, session_id: str, messages: list[dict],
                   agent_id: str = "", group_id: str = "", run_id: str = "", metadata: dict | None = None) -> None:
    """Store the turns at once, idempotent by message id (a re-post stores nothing twice)."""
    rows, seen = [], set()
    for m in messages:
        sender = m.get("sender_name") or m.get("sender_id") or m.get("role") or ""
        message_id = m.get("message_id") or stable_message_id(session_id, m["timestamp"], sender, m["content"])
        if message_id in seen:
            continue
        seen.add(message_id)
        rows.append(Message(tenant=scope.tenant, kb=kb, user_id=user_id, agent_id=agent_id, group_id=group_id,
                            run_id=run_id, user_metadata=metadata or {}, session_id=session_id, message_id=message_id, sender_id=m.get("sender_id") or "",
                            sender_name=m.get("sender_name") or "", role=m.get("role") or "",
                            content=m["content"], timestamp=m["timestamp"]))
    with transaction.atomic():
        # The unique (kb, user_id, session_id, message_id) constraint makes a re-post a no-op.
        Message.objects.bulk_create(rows, ignore_conflicts=True)


def accumulate_messages(scope: Scope, kb: KnowledgeBase, *, user_id: str, session_id: str, messages: list[dict],
                        agent_id: str = "", group_id: str = "", run_id: str = "",
                        metadata: dict | None = None) -> dict:
    """Store the turns at once (idempotent by message id), then extract the MemCells they complete."""
    store_messages(scope, kb, user_id=user_id, session_id=session_id, messages=messages, agent_id=agent_id,
                   group_id=group_id, run_id=run_id, metadata=metadata)
    counts = extract_session(scope, kb, user_id=user_id, session_id=session_id, final=False)
    return accumulate_answer(counts, pending_messages(kb, user_id, session_id).count())


def accumulate_answer(counts: ExtractionCounts, waiting: int) -> dict:
    """POST /memories' answer: `waiting` turns still pending after the extraction `counts` describes."""
    if not counts.segments:
        return {"status": "accumulated", "message_count": waiting}
    return {"status": "extracted", "message_count": waiting, "forced": bool(counts.forced), **counts.as_dict()}


def flush_session(scope: Scope, kb: KnowledgeBase, *, user_id: str, session_id: str) -> dict:
    """Segment and extract everything accumulated for the session, the tail included."""
    return flush_answer(extract_session(scope, kb, user_id=user_id, session_id=session_id, final=True))


def flush_answer(counts: ExtractionCounts) -> dict:
    if not counts.segments:
        return {"status": "no_extraction"}
    return {"status": "extracted", **counts.as_dict()}


def extract_session(scope: Scope, kb: KnowledgeBase, *, user_id: str, session_id: str, final: bool,
                    deadline_seconds: float | None = None) -> ExtractionCounts:
    """Cut the session's pending turns into MemCells and extract every complete one.

    Its LLM steps, every MemCell's together, share LLM_FLUSH_DEADLINE_SECONDS (or the shorter
    `deadline_seconds` a waiting caller asked for); past it the rules."""
    pending = list(pending_messages(kb, user_id, session_id).order_by("timestamp", "id"))
    counts = ExtractionCounts()
    if not pending:
        return counts
    seconds = settings.LLM_FLUSH_DEADLINE_SECONDS  # 0: none
    if deadline_seconds is not None and (not seconds or deadline_seconds < seconds):
        seconds = deadline_seconds
    with llm_scope(seconds=seconds, tenant_id=kb.tenant_id):
        _extract_streams(scope, kb, pending, final=final, counts=counts)
        if counts.segments:  # the user's tree, over the new episodes too (it writes nothing when off)
            summary_tree.refresh_user(kb, user_id)
    return counts


def _extract_streams(scope: Scope, kb: KnowledgeBase, pending: list[Message], *, final: bool,
                     counts: ExtractionCounts) -> None:
    # Turns posted under different scopes (agent, group, run) or metadata are MemCells of their own:
    # a memory carries one scope, and an agent's turns never become another scope's memory.
    streams: dict[tuple, list[Message]] = {}
    for m in pending:
        streams.setdefault(message_scope(m), []).append(m)
    for stream in streams.values():
        cut = segment_turns([turn_for(m) for m in stream], boundary_detector(), final=final)
        counts.forced += cut.forced
        by_id = {m.message_id: m for m in stream}
        recent = Recent()
        for segment in cut.segments:
            extract_segment(scope, kb, [by_id[t.message_id] for t in segment], counts=counts, recent=recent)


def message_scope(m: Message) -> tuple:
    return m.agent_id, m.group_id, m.run_id, json.dumps(m.user_metadata or {}, sort_keys=True)


def scope_fields(first: Message) -> dict:
    """The scope and user metadata every memory of a MemCell carries (its turns share them)."""
    return {"agent_id": first.agent_id, "group_id": first.group_id, "run_id": first.run_id,
            "user_metadata": dict(first.user_metadata or {})}


def inherit_scope(memories, episode: Memory) -> None:
    """Give unsaved memories derived from `episode` its scope and metadata."""
    for m in memories:
        m.agent_id, m.group_id, m.run_id = episode.agent_id, episode.group_id, episode.run_id
        m.user_metadata = dict(episode.user_metadata or {})


def extract_segment(scope: Scope, kb: KnowledgeBase, messages: list[Message], *, counts: ExtractionCounts,
                    recent: Recent) -> Memory | None:
    """One MemCell → an episode and its atomic facts; None when another request claimed the turns first."""
    first, last = messages[0], messages[-1]
    user_id, session_id = first.user_id, first.session_id
    segment_id = memory_uuid("memcell", kb.pk, user_id, session_id, first.message_id, last.message_id, len(messages))
    participants = list(dict.fromkeys(s for s in map(speaker, messages) if s))
    unit = ExtractionUnit(
        topic_hint="",
        # Tool calls and tool replies are what the agent did (its case), not statements to keep as facts.
        passages=[Passage(m.message_id, m.content, speaker(m), m.timestamp)
                  for m in ([m for m in messages if not is_tool_message(m)] or messages)],
        language=kb.language,
        reference_time=first.timestamp,
        # An AI assistant's replies are extracted sparingly (deterministic.ASSISTANT_FACTS_PER_TURN).
        context={"participants": participants, "session_id": session_id,
                 "assistant_speakers": sorted({speaker(m) for m in messages if m.role.lower() == "assistant"})},
    )
    engine = extractor()
    extracted = engine.extract(unit)
    mode = getattr(extracted, "mode", engine.mode)
    cited = {m.message_id for m in messages}
    facts = [f for f in extracted.facts if informative(f.text, participants)]
    by_id = {m.message_id: m for m in messages}
    own = [by_id.get(next(iter(f.source_ids), "")) for f in facts]  # the message each fact was said in
    texts = [attributed(f.text.strip(), (speaker(m) if m else "") or f.subject) for f, m in zip(facts, own)]
    if mode != "llm":  # a model writes its own dates; extracted sentences carry their message's day
        texts = [dated(t, m.timestamp if m else None) for t, m in zip(texts, own)]
    episode_text = narrative(extracted.summary, [f.text.strip() for f in facts], mode) or _fallback_summary(messages)
    # Embedded here for the duplicate check; the embedding cache hands the same vectors to indexing.
    vectors = embedder().embed_documents(texts) if texts else None
    plans = plan_facts(kb, user_id, texts, vectors, recent, [f.subject or "" for f in facts],
                       [f.note for f in facts], agent_id=first.agent_id) if texts else []
    future = plan_foresight(messages, [speaker(m) for m in messages])
    case = plan_case(messages)  # tool calls in the MemCell: what the agent did (the model's, when configured)
    # The model's profile items (None: the rules'), asked here, outside the transaction, for the facts
    # _write_facts will create, in its order (duplicates of stored facts create none).
    proposed = plan_profiles(kb, user_id, [(facts[p.index].subject or "", texts[p.index])
                                           for p in plans if p.duplicate_of is None])
    now = timezone.now()
    try:
        with transaction.atomic():
            claimed = Message.objects.filter(pk__in=[m.pk for m in messages], segment_id__isnull=True)
            if claimed.update(segment_id=segment_id) != len(messages):
                raise _AlreadyClaimed
            episode = Memory.objects.create(
                id=memory_uuid("conv", kb.pk, user_id, segment_id, "episode"), tenant_id=kb.tenant_id, kb=kb,
                kind=Memory.Kind.EPISODE, text=episode_text,
                topic=(extracted.topic or "")[:300], source_message_ids=[m.message_id for m in messages],
                user_id=user_id, session_id=session_id, segment_id=segment_id,
                occurred_at=extracted.occurred_at or first.timestamp, extraction_mode=mode,
                metadata={"participants": participants, "message_count": len(messages),
                          "start": first.timestamp.isoformat(), "end": last.timestamp.isoformat()},
                **scope_fields(first),
            )
            created, changed = _write_facts(kb, episode, facts, texts, plans, cited, mode, scope.actor, now)
            foresight = foresight_memories(episode, future, attributed)
            inherit_scope(foresight, episode)
            Memory.objects.bulk_create(foresight)
            cases = agent_case_memories(episode, case)
            Memory.objects.bulk_create(cases)
            cluster_cases(cases, actor=scope.actor)
            personal = personal_episodes(episode, messages, created, speaker)  # a team chat: one per person
            if personal:
                episode.save(update_fields=["metadata"])
                Memory.objects.bulk_create(personal)
            profile = update_profiles(kb, created, actor=scope.actor, now=now, proposed=proposed)
            link_memories([episode, *created, *foresight, *profile.written])
            history = [MemoryHistory(memory_id=m.id, tenant_id=kb.tenant_id, event=MemoryHistory.Event.ADD,
                                     new_text=m.text, new_status=m.status, actor=scope.actor,
                                     reason=f"extracted from session {session_id}"[:300], created_at=now)
                       for m in (episode, *created, *foresight, *cases, *personal)]
            MemoryHistory.objects.bulk_create(history)
            transaction.on_commit(lambda: index_memories([episode, *created, *changed, *foresight, *cases,
                                                          *personal, *profile.written]))
    except _AlreadyClaimed:
        log.info("MemCell %s of session %s was extracted by another request", segment_id, session_id)
        return None
    for plan, memory in zip([p for p in plans if p.duplicate_of is None], created):
        recent.add(memory, vectors[plan.index])
    counts.segments += 1
    counts.episodes += 1
    counts.facts += len(created)
    counts.merged += sum(1 for p in plans if p.duplicate_of is not None)
    counts.superseded += sum(1 for m in changed if m.status == Memory.Status.SUPERSEDED)
    return episode


def informative(text: str, participants: list[str]) -> bool:
    """Keep a fact only when it says something beyond the speakers' names and stop words ("Thanks, Mel!")."""
    names = {t for p in participants for t in tokenize(p)}
    return len({t for t in tokenize(text) if t not in names}) >= MIN_FACT_TERMS


def attributed(text: str, who: str) -> str:
    """A statement that does not name its speaker is prefixed with it ("Melanie: The kids loved it").

    Without the speaker "the kids loved it" is nobody's, and questions name the person they are
    about (see bench/RESULTS.md, "Design notes moved from code comments", speaker-attributed statements).
    """
    if not who or who.lower() in text.lower() or who.split()[0].lower() in text.lower():
        return text
    return f"{who}: {text}"


class _AlreadyClaimed(Exception):
    pass


def _write_facts(kb, episode: Memory, facts, texts, plans: list[FactPlan], cited: set[str], mode: str, actor: str,
                 now) -> tuple[list[Memory], list[Memory]]:
    """Create the new facts, merge sources into duplicates, supersede contradicted facts."""
    created, changed, merged = [], {}, {}
    for plan in plans:
        fact = facts[plan.index]
        sources = [s for s in dict.fromkeys(fact.source_ids) if s in cited] or list(episode.source_message_ids[:1])
        if plan.duplicate_of is not None:
            target = merged.setdefault(plan.duplicate_of.pk, plan.duplicate_of)
            target.source_message_ids = list(dict.fromkeys([*target.source_message_ids, *sources]))
            continue
        created.append(Memory(
            id=memory_uuid("conv", kb.pk, episode.user_id, episode.segment_id, "fact", plan.index),
            tenant_id=kb.tenant_id, kb=kb, kind=Memory.Kind.ATOMIC_FACT, parent=episode, ordinal=plan.index,
            text=texts[plan.index], topic=episode.topic, source_message_ids=sources, user_id=episode.user_id,
            session_id=episode.session_id, segment_id=episode.segment_id,
            occurred_at=fact.occurred_at or episode.occurred_at, extraction_mode=mode,
            content_hash=Memory.hash_text(texts[plan.index]),
            metadata={"subject": fact.subject or "", **({"note": True} if fact.note else {}), **llm_entities(fact)},
        ))
    inherit_scope(created, episode)
    Memory.objects.bulk_create(created)
    for target in merged.values():
        Memory.objects.filter(pk=target.pk).update(source_message_ids=target.source_message_ids, updated_at=now)
    history = []
    by_index = {m.ordinal: m for m in created}
    for plan in plans:
        for old in plan.supersedes:
            if old.pk in changed or old.status != Memory.Status.ACTIVE:
                continue
            new = by_index[plan.index]
            history.append(MemoryHistory(memory_id=old.pk, tenant_id=kb.tenant_id, event=MemoryHistory.Event.UPDATE,
                                         old_text=old.text, new_text=old.text, old_status=old.status,
                                         new_status=Memory.Status.SUPERSEDED, actor=actor, created_at=now,
                                         reason=f"superseded by {new.pk}: {new.text}"[:300]))
            old.status, old.superseded_by = Memory.Status.SUPERSEDED, new
            old.save(update_fields=["status", "superseded_by", "updated_at"])
            changed[old.pk] = old
    MemoryHistory.objects.bulk_create(history)
    return created, list(changed.values())


def narrative(summary: str, facts: list[str], mode: str) -> str:
    """The episode text: the extractor's summary, completed (model-free mode) with the MemCell's other statements.

    The deterministic summary keeps ~80 words, a budget made for document sections. A MemCell is a
    few chat turns, so its full account fits in EPISODE_WORDS; the episode is what hybrid search
    recalls first, and one that omits most of what was said is rarely recalled for it.
    """
    if mode == "llm":
        return summary
    words = len(summary.split())
    parts = [summary] if summary else []
    for fact in facts:
        if fact in summary or words + len(fact.split()) > EPISODE_WORDS:
            continue
        parts.append(fact if fact.rstrip()[-1:] in ".!?。！？" else fact + ".")
        words += len(fact.split())
    return " ".join(parts)


def _fallback_summary(messages: list[Message]) -> str:
    return " ".join(f"{speaker(m)}: {m.content}" for m in messages)[:500]



def edit_memory(scope: Scope, memory: Memory, text: str) -> Memory:
    """Correct one memory's text: a history row keeps the old text and the indexes get the new one on commit."""
    scope.require_kb(memory.kb_id)
    text = (text or "").strip()
    if not text:
        raise ConversationError("A memory's text cannot be empty; delete the memory instead.")
    if len(text) > Memory.MAX_TEXT_CHARS:
        raise ConversationError(f"A memory's text is at most {Memory.MAX_TEXT_CHARS} characters.")
    if text == memory.text:
        return memory
    return update_memory_text(memory, text, actor=scope.actor, reason="edited through the API")
