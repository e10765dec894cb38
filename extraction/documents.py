"""Document sections: a fact per informative sentence or table row, a summary of the most central sentences.

A sentence in a section is read alone later, so "the company", "该公司" and a he/she with one person
before it become the name (document_coreference.DocumentReferents), another anaphoric start ("It", "This")
gets the section's title as a prefix; relative dates resolve against the passage's own time.
"""

import re

from django.conf import settings

from extraction import document_coreference, summaries
from extraction.base import ExtractionUnit, Passage
from extraction.candidates import TERMINAL, Candidate, as_datetime, clean, is_statement, says_enough
from extraction.dates import resolve_relative_dates
from extraction.sentences import form_captions, is_cjk_text, split_clauses, split_sentences, table_rows


def candidates(unit: ExtractionUnit, passages: list[Passage], label: str) -> list[Candidate]:
    out: list[Candidate] = []
    for passage in passages:
        reference = passage.timestamp or unit.reference_time
        body = form_captions(passage.text)
        rows = table_rows(body)
        if rows:
            # A caption line above the rows (ingest/chunking.py keeps it with its table) says what
            # the table is about better than the section's title: "Hardness of grade SNB22-3".
            first = body.strip().split("\n", 1)[0].strip().rstrip(" :：")
            prefix = first if "|" not in first and len(rows) < len(body.strip().splitlines()) else label
            for row in rows:
                text = f"{prefix}: {row}" if prefix else row
                out.append(Candidate(text, row, [passage.source_id], len(out), is_row=True))
            continue
        referents = document_coreference.DocumentReferents()  # "the company", "该公司", "She" → the name, per passage
        resolving = getattr(settings, "EXTRACTION_DOCUMENT_COREFERENCE", True)
        for sentence in split_sentences(body):
            for clause in split_clauses(sentence):
                cleaned = clean(clause)
                text, resolved = resolve_relative_dates(referents.resolve(cleaned) if resolving else cleaned, reference)
                referents.note(cleaned)
                out.append(
                    Candidate(
                        document_coreference.prefix_topic(text, label),
                        cleaned,
                        [passage.source_id],
                        len(out),
                        occurred_at=as_datetime(resolved, reference),
                    )
                )
    return out


# Sections that list sources, links or licence terms: searchable as chunks, never facts.
_REFERENCE_SECTION = re.compile(
    r"^(?:references?|bibliography|works cited|sources|citations|notes|footnotes|further reading|external links|"
    r"see also|sources and further reading|.*\bproject gutenberg license\b.*|.*\blicen[cs]e\b.*terms.*|"
    r"参考文献|参考资料|外部链接|延伸阅读|注释|脚注)$",
    re.I,
)
# A single line of a reference list: an ISBN or DOI, a retrieval/archive note, a bare link, a
# Gutenberg licence clause.
_REFERENCE_LINE = re.compile(
    r"\bISBN(?:-1[03])?[\s:]*[\dX][\dX -]{8,}|\bdoi:\s*10\.\d{4,}|\b10\.\d{4,}/\S+|"
    r"^(?:retrieved|archived from the original|accessed|archived)\b.{0,80}\d{4}\.?$|"
    r"^\s*(?:https?://|www\.)\S+\s*$|^\^|\bproject gutenberg(?:™|-tm)?\b.{0,40}\b(?:license|licence|trademark)",
    re.I,
)


def is_reference_section(topic_hint: str) -> bool:
    return any(_REFERENCE_SECTION.match(part.strip(" []:")) for part in re.split(r"\s*[›»]\s*", topic_hint) if part)


def is_reference_line(text: str) -> bool:
    return bool(_REFERENCE_LINE.search(text.strip()))


def informative(c: Candidate, topic_hint: str) -> bool:
    """Drop what is not a fact: questions, headings, page furniture, reference lists and licences."""
    original = c.original.strip()
    if is_reference_section(topic_hint) or _REFERENCE_LINE.search(original):
        return False
    if c.is_row:
        return len(c.tokens) >= 1
    if not is_statement(original, topic_hint):
        return False
    cjk = is_cjk_text(original)
    if not TERMINAL.search(original) and _looks_like_heading(original, cjk):
        return False
    return says_enough(original, c.tokens, cjk)


# "监制人：刘泽彭", "Subject: Test Email", "Commission file number: 000-30653": a short label, a colon,
# a value. Colophons, forms, e-mail headers and data sheets are made of them; they state a fact.
_KEY_VALUE = re.compile(r"^(?P<label>[^:：|]{1,40}?)\s*[:：]\s*(?P<value>\S.*)$")
# An amount ("₹67,845 crore", "$1.2 million", "35 %") after the first word: a heading may be numbered
# ("3.1 Operating segments"), it does not state a figure.
_AMOUNT = re.compile(r"[$€£¥₹]\s?\d|\d{1,3}(?:,\d{3})+|\d\.\d|\d\s?%")


def _looks_like_heading(text: str, cjk: bool) -> bool:
    key_value = _KEY_VALUE.match(text)
    if key_value and len(key_value.group("label").split()) <= 6 and not key_value.group("value").startswith("//"):
        return False
    if _AMOUNT.search(text.split(maxsplit=1)[-1]) and len(text.split()) > 1:
        return False
    if cjk:
        return len(text) <= 10
    tokens = text.split()
    capitalised = sum(1 for w in tokens if w[:1].isupper() or not w[:1].isalpha())
    return len(tokens) <= 8 and capitalised >= 0.6 * len(tokens)


def summary(kept: list[Candidate], passages: list[Passage], zh: bool, label: str = "") -> str:
    budget = summaries.budget_for(zh)
    prose = [c for c in kept if not c.is_row]
    if not prose and kept:
        return summaries.trimmed(table_summary(kept, label, zh), budget, zh)
    if not prose:
        return summaries.trimmed(" ".join(p.text.strip() for p in passages), budget, zh)
    # The summary repeats the original sentence: the "[Topic]" prefix only helps a fact read alone.
    picked = summaries.pick(prose, budget, zh)
    sentences = [summaries.ended(_unprefixed(c.text), zh) for c in picked]
    return summaries.trimmed(summaries.joined(sentences, zh), budget, zh)


def table_summary(rows: list[Candidate], label: str, zh: bool) -> str:
    """What a section of table rows holds: its columns and how many rows, not one row's values.

    The central rows made the summary before, so the episode of a sheet stated one row's figures
    ("Stanley Cups Since 67: Team: Blues | … | Stanley Cups: 1") and answered a question about
    another row with them; each row is a fact of its own."""
    cells = [cell.split(": ", 1) for row in rows for cell in row.original.split(" | ")]
    columns = list(dict.fromkeys(c[0] for c in cells if len(c) == 2 and c[0]))[:12]
    if zh:
        text = f"表格，共 {len(rows)} 行" + (f"，列：{'、'.join(columns)}" if columns else "") + "。"
        return f"{label}：{text}" if label else text
    text = f"a table of {len(rows)} rows" + (f" with the columns {', '.join(columns)}" if columns else "") + "."
    return f"{label}: {text}" if label else text[:1].upper() + text[1:]


def _unprefixed(text: str) -> str:
    return re.sub(r"^\[[^\]]*\] ", "", text)
