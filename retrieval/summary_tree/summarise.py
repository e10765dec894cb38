"""A cluster's summary: extractive by rule (no model), or written by the LLM when one is configured.

The rule keeps the cluster's most central sentences: a sentence scores by the words it shares with
the other members of the cluster (a word found in several members is what they have in common; a
word of one member alone is its detail), over the square root of its length so a long sentence does
not win by size. Sentences are taken one per member in turn, best member first, so a summary of six
sections speaks of more than the most repetitive one, up to SUMMARY_CHARS, then put back in the
members' order. The members' topics (a section's title, a chat's subject) lead the text: a broad
question names the topic ("what does the book say about skating?") more often than any sentence.
"""

import logging
import math
import re
from dataclasses import dataclass

from django.conf import settings

from retrieval.text import tokenize

log = logging.getLogger(__name__)

RULES_VERSION = "rules-4"  # bump when the rules write other text: reindex then rebuilds every tree
LLM_VERSION = "llm-1"
SUMMARY_CHARS = 700  # about two e5 passages' worth of the 512-token window, and a paragraph to read
SENTENCES_PER_MEMBER = 6  # a member's first sentences: an episode or a summary leads with its point
PATH_SEPARATOR = "›"  # how a document episode's topic joins its section path (ingest's episode topics)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")


@dataclass(frozen=True)
class Member:
    topic: str
    text: str
    paths: tuple[str, ...] = ()  # the topics (section paths) of the episodes under it; () = its own topic


LEAD_CHARS = 280  # the lead (the parts named) leaves the rest of SUMMARY_CHARS to sentences


@dataclass(frozen=True)
class Summary:
    topic: str
    text: str
    by: str  # "rules" or "llm"
    body: str = ""  # the text without its lead: what the level above reads sentences from ("" = all of it)


def identity() -> str:
    """The summariser configured now: part of a tree's identity, so a change rebuilds trees on reindex."""
    return f"{LLM_VERSION}:{settings.LLM_MODEL}" if settings.LLM_ENABLED else RULES_VERSION


def summarise(members: list[Member]) -> Summary:
    if settings.LLM_ENABLED:
        written = _asked(members)
        if written is not None:
            return written
    return from_rules(members)


def from_rules(members: list[Member]) -> Summary:
    lead, topic = _topics(list(dict.fromkeys(p.strip() for m in members for p in (m.paths or (m.topic,)) if p.strip())))
    sentences = [[s.strip() for s in _SENTENCE_END.split(m.text) if s and len(s.strip()) > 1][:SENTENCES_PER_MEMBER]
                 for m in members]
    spread: dict[str, int] = {}  # word -> members it occurs in
    for member in sentences:
        for word in {w for s in member for w in tokenize(s)}:
            spread[word] = spread.get(word, 0) + 1
    # A word of every member (of three or more) is as often a speaker's name or a template's word
    # ("talked about") as the theme: it counts half.
    everywhere = {w for w, n in spread.items() if n == len(members) >= 3}
    spread = {w: (n - 1) / 2 + 1 if w in everywhere else n for w, n in spread.items()}
    ranked = [sorted(((_centrality(s, spread), j, s) for j, s in enumerate(member)), reverse=True)
              for member in sentences]
    order = sorted(range(len(members)), key=lambda i: -(ranked[i][0][0] if ranked[i] else -1.0))
    budget = SUMMARY_CHARS - len(lead)
    picked: list[tuple[int, int, str]] = []
    for turn in range(SENTENCES_PER_MEMBER):
        for i in order:
            if turn < len(ranked[i]) and len(ranked[i][turn][2]) <= budget:
                picked.append((i, ranked[i][turn][1], ranked[i][turn][2]))
                budget -= len(ranked[i][turn][2]) + 1
        if budget < 40:
            break
    body = " ".join(s for _, _, s in sorted(picked))
    text = f"{lead}. {body}" if lead and body else (lead or body)
    return Summary(topic=topic[:300], text=text, by="rules", body=body)


def _topics(topics: list[str]) -> tuple[str, str]:
    """The lead of a summary, and its own short topic, from the topics (section paths) of the episodes
    under it. Paths share their start ("Book › Chapter II › Rinks", "Book › Chapter III"): it is said
    once, then each part below it once ("Book: Chapter II; Chapter III"), so the lead of a book's root
    reads as its contents, not as the book's title a hundred times. The topic is that start, or the
    first parts."""
    paths = [[p.strip() for p in t.split(PATH_SEPARATOR) if p.strip()] for t in topics]
    paths = [p for p in paths if p]
    shared = 0
    while paths and len({tuple(p[:shared + 1]) for p in paths}) == 1 and any(len(p) > shared + 1 for p in paths):
        shared += 1
    head = f" {PATH_SEPARATOR} ".join(paths[0][:shared]) if shared else ""
    parts = list(dict.fromkeys(p[shared] for p in paths if len(p) > shared))
    named = ""
    for n, part in enumerate(parts):  # as many as fit the lead, then how many more
        more = f" (and {len(parts) - n} more)" if n < len(parts) else ""
        if len(head) + len(named) + len(part) + len(more) + 4 > LEAD_CHARS:
            named += more
            break
        named = f"{named}; {part}" if named else part
    lead = f"{head}: {named}" if head and named else (head or named)
    return lead, head or "; ".join(parts[:3])


def _centrality(sentence: str, spread: dict[str, int]) -> float:
    words = set(tokenize(sentence))
    if not words:
        return 0.0
    return sum(spread[w] - 1 for w in words) / math.sqrt(len(words))


def _asked(members: list[Member]) -> Summary | None:
    from common.llm import LlmError, complete_json

    def valid(obj):
        return isinstance(obj.get("summary"), str) and obj["summary"].strip() and isinstance(obj.get("topic", ""), str)

    parts = "\n\n".join(f"[{m.topic}]\n{m.text}" if m.topic else m.text for m in members)
    messages = [
        {"role": "system", "content": (
            "Summarise the passages below in one paragraph of at most 120 words, in their own language: "
            "what they are about together, the main points, the names they share. Give a short topic too. "
            'Answer with JSON: {"topic": "...", "summary": "..."}')},
        {"role": "user", "content": parts[:6000]},
    ]
    try:
        obj = complete_json(messages, schema_check=valid, max_tokens=400, step="summary_tree")
    except LlmError as exc:
        log.info("summary from the rules: the LLM failed (%s)", exc)
        return None
    return Summary(topic=str(obj.get("topic") or "").strip()[:300], text=obj["summary"].strip()[:4000], by="llm")
