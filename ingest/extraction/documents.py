"""Document sections: a fact per informative sentence or table row, a summary of the most central sentences.

A sentence in a section is read alone later, so an anaphoric start ("It", "This") gets the section's
title as a prefix; relative dates resolve against the passage's own time.
"""

import re

from ingest.extraction import coreference, summaries
from ingest.extraction.base import ExtractionUnit, Passage
from ingest.extraction.candidates import TERMINAL, Candidate, as_datetime, clean, is_statement, says_enough
from ingest.extraction.dates import resolve_relative_dates
from ingest.extraction.sentences import is_cjk_text, split_clauses, split_sentences, table_rows


def candidates(unit: ExtractionUnit, passages: list[Passage], label: str) -> list[Candidate]:
    out: list[Candidate] = []
    for passage in passages:
        reference = passage.timestamp or unit.reference_time
        rows = table_rows(passage.text)
        if rows:
            for row in rows:
                text = f"{label}: {row}" if label else row
                out.append(Candidate(text, row, [passage.source_id], len(out), is_row=True))
            continue
        for sentence in split_sentences(passage.text):
            for clause in split_clauses(sentence):
                cleaned = clean(clause)
                text, resolved = resolve_relative_dates(cleaned, reference)
                out.append(
                    Candidate(
                        coreference.prefix_topic(text, label),
                        cleaned,
                        [passage.source_id],
                        len(out),
                        occurred_at=as_datetime(resolved, reference),
                    )
                )
    return out


def informative(c: Candidate, topic_hint: str) -> bool:
    """Drop what is not a fact: questions, headings, page furniture."""
    original = c.original.strip()
    if c.is_row:
        return len(c.tokens) >= 1
    if not is_statement(original, topic_hint):
        return False
    cjk = is_cjk_text(original)
    if not TERMINAL.search(original) and _looks_like_heading(original, cjk):
        return False
    return says_enough(original, c.tokens, cjk)


def _looks_like_heading(text: str, cjk: bool) -> bool:
    if cjk:
        return len(text) <= 10
    tokens = text.split()
    capitalised = sum(1 for w in tokens if w[:1].isupper() or not w[:1].isalpha())
    return len(tokens) <= 8 and capitalised >= 0.6 * len(tokens)


def summary(kept: list[Candidate], passages: list[Passage], zh: bool) -> str:
    budget = summaries.budget_for(zh)
    prose = [c for c in kept if not c.is_row] or kept
    if not prose:
        return summaries.trimmed(" ".join(p.text.strip() for p in passages), budget, zh)
    # The summary repeats the original sentence: the "[Topic]" prefix only helps a fact read alone.
    picked = summaries.pick(prose, budget, zh)
    sentences = [summaries.ended(_unprefixed(c.text), zh) for c in picked]
    return summaries.trimmed(summaries.joined(sentences, zh), budget, zh)


def _unprefixed(text: str) -> str:
    return re.sub(r"^\[[^\]]*\] ", "", text)
