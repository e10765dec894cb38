"""A candidate fact and the steps every unit's candidates go through, documents and chats alike.

Each sentence (or table row) of a unit becomes a candidate; candidates are cleaned, judged
informative or not, de-duplicated and capped before the survivors become facts.
"""

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, time

from extraction import coreference

_LEADING_FILLER = re.compile(
    r"^(?:(?:oh my god|oh my|oh|wow|hey|hi|hello|well|so|yeah|yes|yep|no|nope|ok|okay|haha+|lol|um+|uh+|hmm+|ah+|"
    r"aw+|omg|gosh|man|dude|honestly|actually|anyway|anyways|btw|by the way|you know|i mean)\s*[,!.…]+\s*)+",
    re.I,
)
_ZH_FILLER = re.compile(
    r"^(?:嗯+|哈哈+|啊+|哦+|噢+|嘿+|嗨+|哇+|好吧|好的|其实|那个|对了|你好|您好|哈喽)[啊呀]?[，,！!。…~～]*"
)
_EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f\u200d]+")
BOILERPLATE = re.compile(
    r"^(?:page\s*\d+(?:\s*(?:of|/)\s*\d+)?|-\s*\d+\s*-|\d+|第\s*\d+\s*页.*|copyright\b.*|©.*|all rights reserved\.?|"
    r"table of contents|contents|confidential|click here.*|privacy policy|terms of (?:use|service)|版权所有.*|目录)$",
    re.I,
)
_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl"})  # PDF text keeps them
TERMINAL = re.compile(r"[.!?。！？;；:：\"'”’)）]$")
QUESTION = re.compile(r"[?？][\"'”’)）]*$")


@dataclass
class Candidate:
    text: str  # the fact as it will be stored
    original: str  # the sentence as written, for scoring and pronoun look-back
    source_ids: list[str]
    position: int
    speaker: str = ""
    turn: str = ""  # chats: the message the sentence was said in
    occurred_at: datetime | None = None
    is_row: bool = False
    is_note: bool = False  # a chat client's note ("shares a photo of …"): a fact, never a topic word
    tokens: list[str] = field(default_factory=list)
    score: float = 0.0
    answers: coreference.Question | None = None  # chats: the other speaker's question this turn follows


def topic_label(topic_hint: str) -> str:
    """The last element of a section path: 'Guide › Install' → 'Install'."""
    parts = [p.strip() for p in re.split(r"\s*[›»]\s*|\s+>\s+", topic_hint) if p.strip()]
    return parts[-1] if parts else ""


def clean(sentence: str, participants: list[str] = ()) -> str:
    text = _EMOJI.sub("", sentence).replace("’", "'").translate(_LIGATURES)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"([!?！？])\1+", r"\1", text)
    stripped = _ZH_FILLER.sub("", _LEADING_FILLER.sub("", text))
    # A leading vocative, by full name or a nickname that starts it: "Hey Caroline, I went…", "Mel, I…".
    for name in participants:  # "AI伴侣，今天…"
        stripped = re.sub(rf"^{re.escape(name)}\s*[,，!！]\s*", "", stripped)
    vocative = re.match(r"^(?:(?i:hey|hi|hello|oh|wow|thanks|thank you|aw+)\s+)?([A-Z][a-z]+)\s*[,，!！]\s*", stripped)
    if vocative and any(name.startswith(vocative.group(1)) for name in participants):
        stripped = stripped[vocative.end() :]
    if len(stripped) >= 3:
        text = stripped
    text = text.strip(" -–—*•")
    # A quotation spanning several sentences leaves a stray mark on its first and last sentence. A
    # '"' that closes a “ (Chinese wiki text mixes them: 选为“诗人王子") is not stray.
    if text.count('"') % 2 and (text.count('"') + text.count("“") + text.count("”")) % 2:
        text = text[1:] if text.startswith('"') else text[:-1] if text.endswith('"') else text.replace('"', "", 1)
    return text.strip()


def is_statement(original: str, topic_hint: str) -> bool:
    """Not empty, not page furniture, not a question, not the section's own title."""
    if not original or BOILERPLATE.match(original) or QUESTION.search(original):
        return False
    return original.strip(" .:：") != topic_hint.strip() and original.strip(" .:：") != topic_label(topic_hint)


def says_enough(original: str, meaningful: list[str], cjk: bool) -> bool:
    """Long enough, with at least two words that carry meaning."""
    if cjk:
        return len(original) >= 6 and len(meaningful) >= 2
    return len(original.split()) >= 3 and len(meaningful) >= 2


def deduplicated(candidates: list[Candidate]) -> list[Candidate]:
    by_key: dict[str, Candidate] = {}
    for c in candidates:
        key = re.sub(r"[\W_]+", " ", c.text.lower()).strip()
        if key in by_key:
            by_key[key].source_ids = list(dict.fromkeys(by_key[key].source_ids + c.source_ids))
        else:
            by_key[key] = c
    return list(by_key.values())


def information_of(candidates: list[Candidate]):
    """How informative each candidate is among these: many distinct words the rest does not repeat
    (inverse document frequency inside the unit)."""
    df = Counter(t for c in candidates for t in set(c.tokens))
    scale = math.log(len(candidates) + 1)

    def information(c: Candidate) -> float:
        # Summed in sorted order: float addition over a set would follow PYTHONHASHSEED, and ties
        # near the cap would keep different candidates from one run to the next.
        unique = sorted(set(c.tokens))
        novelty = sum(math.log((len(candidates) + 1) / df[t]) for t in unique) / (len(unique) * scale) if unique else 0
        return len(unique) ** 0.5 * (0.5 + novelty)

    return information


def capped(candidates: list[Candidate], limit: int) -> list[Candidate]:
    """The `limit` most informative candidates, in source order.

    Informative means many distinct words that the rest of the unit does not repeat (inverse
    document frequency inside the unit), so forty near-identical log lines do not push out the one
    sentence that says something else.
    """
    if len(candidates) <= limit:
        return candidates
    ranked = sorted(candidates, key=information_of(candidates), reverse=True)
    return sorted(ranked[:limit], key=lambda c: c.position)


def capped_by_role(candidates: list[Candidate], limit: int, assistants: set[str], per_turn: int) -> list[Candidate]:
    """The people's statements first, then at most `per_turn` of each assistant reply, within `limit`, in source order.

    What a user says about themselves is the memory; an assistant's reply is context for it.
    """
    information = information_of(candidates)
    people = [c for c in candidates if c.speaker not in assistants]
    replies: dict[str, list[Candidate]] = {}
    for c in candidates:
        if c.speaker in assistants:
            replies.setdefault(c.turn, []).append(c)
    chosen = sorted(people, key=information, reverse=True)[:limit]
    kept_replies = [c for turn in replies.values() for c in sorted(turn, key=information, reverse=True)[:per_turn]]
    chosen += sorted(kept_replies, key=information, reverse=True)[: max(0, limit - len(chosen))]
    return sorted(chosen, key=lambda c: c.position)


def as_datetime(resolved, reference: datetime | None) -> datetime | None:
    if resolved is None:
        return None
    tz = reference.tzinfo if isinstance(reference, datetime) else None
    return datetime.combine(resolved.start, time.min, tzinfo=tz)
