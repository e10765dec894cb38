"""Group and personal episodes: a MemCell of a team chat is told once for the group and once per person.

A MemCell is a group conversation when its turns were posted with a group_id or when at least
MIN_GROUP_SPEAKERS people (not an assistant, not a tool) speak in it. Its episode is then the
group episode (metadata episode_type "group"), and every person who said something of their own (a
turn with content terms beyond the others' names and stop words) gets a personal episode: what
they said in that MemCell, in their words, their facts first. Personal episodes are episodes (kind
"episode", metadata episode_type "personal", participant, group_episode_id), searchable like any;
a search with filters.participant ranks that person's personal episodes and own facts first
(retrieval.search.participants). They are written whatever extracted the MemCell (rules or LLM):
the structure is the same in both modes, the group episode's narrative is the extractor's.
"""

from memory.ids import memory_uuid
from memory.models import Memory, Message
from retrieval.text import tokenize

MIN_GROUP_SPEAKERS = 3
PERSONAL_WORDS = 200
MACHINE_ROLES = {"assistant", "agent", "ai", "bot", "system", "tool", "function", "tool_call", "tool_result"}


def people(messages: list[Message], speaker) -> list[str]:
    return list(dict.fromkeys(speaker(m) for m in messages
                              if speaker(m) and (m.role or "").strip().lower() not in MACHINE_ROLES))


def is_group(messages: list[Message], speaker) -> bool:
    return bool(messages[0].group_id) and len(people(messages, speaker)) >= 2 or \
        len(people(messages, speaker)) >= MIN_GROUP_SPEAKERS


def of_their_own(text: str, names: set[str]) -> bool:
    """A turn that states something: 3 content terms beyond the people's names (2 when Chinese), so
    "Thanks Alice!", "Sounds good, Bob" or "好的" are not."""
    terms = set(tokenize(text)) - names
    chinese = any("\u4e00" <= ch <= "\u9fff" for term in terms for ch in term)
    return len(terms) >= (2 if chinese else 3)


def personal_episodes(episode: Memory, messages: list[Message], facts: list[Memory], speaker) -> list[Memory]:
    """Unsaved personal episodes of a group MemCell's people (fixed ids); [] when it is no group chat.
    Marks `episode` (unsaved change to its metadata) as the group episode."""
    if not is_group(messages, speaker):
        return []
    names = people(messages, speaker)
    episode.metadata = {**episode.metadata, "episode_type": "group", "people": names}
    others = {t for n in names for t in tokenize(n)}
    by_message = {m.message_id: m for m in messages}
    out = []
    for ordinal, name in enumerate(names):
        own = [m for m in messages if speaker(m) == name and (m.role or "").strip().lower() not in MACHINE_ROLES]
        if not any(of_their_own(m.content, others) for m in own):
            continue  # only greetings, acknowledgements or names: nothing of their own
        said = [f.text for f in facts if f.source_message_ids
                and speaker(by_message.get(f.source_message_ids[0], own[0])) == name]
        said += [f"{name}: {m.content.strip()}" for m in own if not any(m.content.strip()[:40] in s for s in said)]
        words, parts = 0, []
        for statement in said:
            n = len(statement.split())
            if parts and words + n > PERSONAL_WORDS:
                break
            parts.append(statement if statement.rstrip()[-1:] in ".!?。！？" else statement + ".")
            words += n
        text = f"{name}'s part of the conversation: " + " ".join(parts)
        out.append(Memory(
            id=memory_uuid("conv", episode.kb_id, episode.user_id, episode.segment_id, "personal", name),
            # Under the group episode, so deleting it (and its facts) takes the personal ones along.
            tenant_id=episode.tenant_id, kb_id=episode.kb_id, kind=Memory.Kind.EPISODE, parent=episode,
            ordinal=ordinal + 1,
            text=text, topic=episode.topic, source_message_ids=[m.message_id for m in own],
            user_id=episode.user_id, session_id=episode.session_id, segment_id=episode.segment_id,
            occurred_at=own[0].timestamp, extraction_mode=episode.extraction_mode,
            content_hash=Memory.hash_text(text),
            metadata={"episode_type": "personal", "participant": name, "group_episode_id": str(episode.pk),
                      "message_count": len(own)},
            agent_id=episode.agent_id, group_id=episode.group_id, run_id=episode.run_id,
            user_metadata=dict(episode.user_metadata or {}),
        ))
    return out
