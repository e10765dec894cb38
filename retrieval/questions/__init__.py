"""Candidate questions: for a fact or a chunk, the questions it answers (issue 39).

A short question finds a long passage badly by its words and its vector: the passage says the
answer, not the question. Indexed beside their source as rows of their own kind ("question"), the
questions a passage answers are matched question to question, and lift their source in hybrid search
(retrieval/search/questions.py); they are never results themselves. Without an LLM they come from the
statement's own structure (english.py, chinese.py); with one configured (LOCI_LLM) the model is asked,
the rules answering when it fails.

`identity()` names the generator: a build of the indexes records it (retrieval/builds.py), and a
search reads a build's questions only when they were written by the generator configured now.
"""

import logging
import re

from django.conf import settings

from retrieval.questions import chinese, english
from retrieval.relevance import cjk_share

log = logging.getLogger(__name__)

# Bump when the rules change what they write: builds made with another version stop serving
# their questions until `manage.py reindex` writes them again.
RULES_VERSION = "rules-1"
LLM_VERSION = "llm-1"
MAX_QUESTIONS = 6  # per source: the removal of a source names this many question ids
SENTENCE_LIMIT = 12  # sentences of a chunk read for questions (the first ones: a chunk's lead states its topic)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")


def enabled() -> bool:
    return bool(settings.CANDIDATE_QUESTIONS)


def identity() -> str:
    """The generator that writes questions now ("" when none is written)."""
    if not enabled():
        return ""
    return f"{LLM_VERSION}:{settings.LLM_MODEL}" if settings.LLM_ENABLED else RULES_VERSION


def questions_for(text: str) -> list[str]:
    """Up to MAX_QUESTIONS distinct questions `text` answers: the LLM's when one is configured, else the rules'."""
    if settings.LLM_ENABLED:
        asked = _asked(text)
        if asked:
            return list(asked)
    return from_rules(text)


def from_rules(text: str) -> list[str]:
    out: list[str] = []
    for sentence in [s for s in _SENTENCE_END.split(text) if s and s.strip()][:SENTENCE_LIMIT]:
        rules = chinese if cjk_share(sentence) >= 0.3 else english
        for q in rules.questions(sentence):
            if q not in out:
                out.append(q)
        if len(out) >= MAX_QUESTIONS:
            break
    return out[:MAX_QUESTIONS]


_ASKED_LIMIT = 4096
_asked_before: dict[tuple[str, str], tuple[str, ...]] = {}  # a reindex or a retried stage asks again for the same text


def _asked(text: str) -> tuple[str, ...]:
    key = (settings.LLM_MODEL, text)
    if key not in _asked_before:
        asked = _ask(text)
        if not asked:
            return ()  # a failure is not remembered: the next write asks again
        if len(_asked_before) >= _ASKED_LIMIT:
            _asked_before.clear()
        _asked_before[key] = asked
    return _asked_before[key]


def _ask(text: str) -> tuple[str, ...]:
    from common.llm import LlmError, complete_json

    def valid(obj):
        return isinstance(obj.get("questions"), list) and all(isinstance(q, str) for q in obj["questions"])

    messages = [
        {"role": "system", "content": (
            f"List up to {MAX_QUESTIONS} short questions a user might ask that the text below answers, "
            "each answerable from the text alone, in the text's own language. "
            'Answer with JSON: {"questions": ["..."]}')},
        {"role": "user", "content": text[:4000]},
    ]
    try:
        obj = complete_json(messages, schema_check=valid, max_tokens=400, step="candidate_questions")
    except LlmError as exc:
        log.info("candidate questions from the rules: the LLM failed (%s)", exc)
        return ()
    seen = dict.fromkeys(q.strip() for q in obj["questions"] if q.strip() and len(q) <= 300)
    return tuple(list(seen)[:MAX_QUESTIONS])
