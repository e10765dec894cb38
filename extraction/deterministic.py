"""The extractor used when no LLM is configured: extractive, self-contained facts in milliseconds.

Facts are the unit's informative sentences (long ones split at safe clause boundaries), with pronouns
and relative dates resolved where that is safe; table rows become one fact each. The episode summary
is the unit's most central sentences in their original order. What differs between a document
section and a chat segment lives in `documents.py` and `chats.py`; the steps both share in
`candidates.py` and `summaries.py`.
"""

from datetime import datetime

from extraction import chats, documents, salience
from extraction.base import ExtractedEpisode, ExtractedFact, ExtractionUnit, Passage
from extraction.candidates import BOILERPLATE, capped, capped_by_role, deduplicated, topic_label
from extraction.sentences import is_cjk_text

MAX_FACTS = 40  # an LLM extraction of one section yields 5-30 facts; more is noise for retrieval
KEYWORD_SENTENCES = 15  # keywords come from the most central sentences only: cheaper, and on topic
# An AI assistant's reply (a speaker named in the unit's context["assistant_speakers"]) keeps at most
# this many statements, its most informative ones. A reply is ~1.8 KB of advice (LongMemEval-S: 89 %
# of all sentence facts): as sentences it outnumbered the user's own statements, won the MAX_FACTS
# cap against them (5 of the 30 evidence turns of the dev set lost every fact) and crowded the
# search results, and embedding it was most of the ingestion CPU.
ASSISTANT_FACTS_PER_TURN = 4


class DeterministicExtractor:
    """Sentence-level extraction with safe pronoun and date resolution; no model, no network."""

    mode = "deterministic"

    def __init__(self, *, max_facts: int = MAX_FACTS):
        self.max_facts = max_facts

    def extract(self, unit: ExtractionUnit) -> ExtractedEpisode:
        passages = [p for p in unit.passages if p.text and p.text.strip()]
        text = "\n".join(p.text for p in passages)
        language = (unit.language or "auto").lower()
        zh = language.startswith("zh") or (language == "auto" and is_cjk_text(text))
        conversation = any(p.speaker for p in passages)
        participants = chats.participants(unit, passages)
        label = topic_label(unit.topic_hint)
        ignore = {w for name in participants for w in (*salience.words(name), *salience.terms(name))}

        if conversation:
            candidates = chats.candidates(unit, passages, participants)
        else:
            candidates = documents.candidates(unit, passages, label)
        for c in candidates:
            c.tokens = salience.terms(c.original, ignore=ignore)
        if conversation:
            chats.attach_questions(candidates, ignore)
        informative = chats.informative if conversation else documents.informative
        kept = [c for c in candidates if informative(c, unit.topic_hint)]
        if not kept and (conversation or not documents.is_reference_section(unit.topic_hint)):
            # A one-line section still deserves a fact; a reference list or licence does not.
            kept = [c for c in candidates if c.tokens and not BOILERPLATE.match(c.original)
                    and (conversation or not documents.is_reference_line(c.original))][:3]
        kept = deduplicated(kept)
        boost = set(salience.terms(unit.topic_hint))
        for c, score in zip(kept, salience.centrality([c.tokens for c in kept], boost=boost)):
            c.score = score

        assistants = set(unit.context.get("assistant_speakers") or ()) if conversation else set()
        facts = (capped_by_role(kept, self.max_facts, assistants, ASSISTANT_FACTS_PER_TURN) if assistants
                 else capped(kept, self.max_facts))
        # Keywords need real words (jieba for Chinese), and only where no section title names the topic.
        topic_words = []
        if conversation or not unit.topic_hint:
            top = sorted((c for c in kept if not c.is_note), key=lambda c: c.score, reverse=True)[:KEYWORD_SENTENCES]
            originals = [c.original for c in sorted(top, key=lambda c: c.position)]
            topic_words = salience.keywords(
                [salience.content_words(t, ignore=ignore) for t in originals], originals, ignore=ignore
            )
        if conversation:
            topic = unit.topic_hint or chats.topic(participants, topic_words, zh)
            summary = chats.summary(kept, participants, topic_words, passages, zh)
        else:
            topic = unit.topic_hint or ", ".join(topic_words)
            summary = documents.summary(kept, passages, zh, label)
        episode = ExtractedEpisode(
            topic=topic,
            summary=summary,
            facts=[
                ExtractedFact(c.text, c.source_ids, c.occurred_at, c.speaker if conversation else "", c.is_note)
                for c in facts
            ],
            source_ids=[p.source_id for p in passages],
            occurred_at=_episode_time(unit, passages),
        )
        episode.mode = self.mode
        return episode


def _episode_time(unit: ExtractionUnit, passages: list[Passage]) -> datetime | None:
    stamps = [p.timestamp for p in passages if p.timestamp]
    return min(stamps) if stamps else unit.reference_time
