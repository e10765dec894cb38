"""Sentence and clause segmentation for English and Chinese text, and table-row recognition."""

import re

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_SPACE = re.compile(r"\s")

# Chinese sentence ends, with any closing quotes/brackets that belong to the sentence they close.
_ZH_END = re.compile(r"[。！？；]+[”’」』）》\"']*|[!?]+[”’」』）》]*(?=[\u4e00-\u9fff“「])")

# A Latin sentence end: terminal punctuation, optional closers, whitespace, then something that can
# start a sentence. Lower-case continuations ("e.g. the cat") therefore never split.
_EN_END = re.compile(r"(?:[.!?]+|…)[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9\u4e00-\u9fff])")

# Tokens ending in "." that do not end a sentence before a capital ("Dr. Smith", "U.S. Army").
_ABBREVIATIONS = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "sr",
    "jr",
    "st",
    "ste",  # suite, in addresses ("Cameron Street Ste. 305")
    "mt",
    "ft",
    "gen",
    "col",
    "capt",
    "lt",
    "sgt",
    "rev",
    "hon",
    "gov",
    "pres",
    "vs",
    "v",
    "e.g",
    "i.e",
    "cf",
    "al",
    "approx",
    "dept",
    "est",
    "fig",
    "figs",
    "no",
    "nos",
    "vol",
    "vols",
    "pp",
    "p",
    "ch",
    "sec",
    "art",
    "inc",
    "ltd",
    "co",
    "corp",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "u.s",
    "u.k",
    "a.m",
    "p.m",
    "ph.d",
    "b.a",
    "m.a",
    "b.sc",
    "m.sc",
    "op",
    "ed",
    "eds",
    "rep",
    "sen",
    "ave",
    "blvd",
    "rd",
}

_BULLET = re.compile(r"^\s*(?:[-*•·▪◦‣]|\d{1,3}[.)]|[a-zA-Z][.)]|\(\d{1,3}\))\s+")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CELL = re.compile(r"^\s*([^:|]{1,60}?)\s*:\s*(.*\S)\s*$")


def is_cjk_text(text: str, threshold: float = 0.2) -> bool:
    """True when at least `threshold` of the non-space characters are CJK ideographs."""
    letters = len(text) - len(_SPACE.findall(text))
    return bool(letters) and len(_CJK.findall(text)) / letters >= threshold


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def lines_of(text: str) -> list[str]:
    """Logical lines: wrapped lines of a paragraph joined, bullets, table rows and short lines kept apart."""
    out: list[str] = []
    in_fence = False
    previous_open = False  # whether the last line can be continued by the next one
    for raw in text.splitlines():
        if _FENCE.match(raw):
            in_fence = not in_fence
            previous_open = False
            continue
        line = raw.strip()
        if in_fence or not line:
            previous_open = False
            continue
        starts_item = bool(_BULLET.match(raw)) or "|" in line
        if previous_open and not starts_item:
            if re.search(r"[a-z]-$", out[-1]) and line[:1].islower():
                out[-1] = out[-1][:-1] + line  # a word hyphenated at the line end: "applica-" + "tions"
            else:
                joiner = "" if has_cjk(out[-1][-1:]) and has_cjk(line[:1]) else " "
                out[-1] = out[-1] + joiner + line
        else:
            out.append(_BULLET.sub("", line, count=1) if _BULLET.match(raw) else line)
        # A line that is a table row, or a short line without terminal punctuation (a heading), stands alone.
        previous_open = "|" not in line and (len(line) > 50 or line[-1:] in ",;:，、-")
    return out


def split_sentences(text: str) -> list[str]:
    """Sentences of a passage in order; Chinese and English punctuation, abbreviations and decimals kept."""
    sentences: list[str] = []
    for line in lines_of(text):
        for piece in _split_at(line, _ZH_END):
            # Inside Chinese, ". " and "! " belong to Latin names ("Hey! Say! JUMP", "S.G. Tallentyre").
            sentences.extend([piece] if is_cjk_text(piece) else _split_english(piece))
    return [s for s in (s.strip() for s in sentences) if s]


def _split_at(text: str, pattern: re.Pattern) -> list[str]:
    parts, start = [], 0
    for match in pattern.finditer(text):
        parts.append(text[start : match.end()])
        start = match.end()
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _split_english(text: str) -> list[str]:
    parts, start = [], 0
    for match in _EN_END.finditer(text):
        before = text[start : match.start() + 1]
        if text[match.start()] == "." and _ends_with_abbreviation(before):
            continue
        parts.append(text[start : match.end()])
        start = match.end()
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _ends_with_abbreviation(text: str) -> bool:
    word = text.rstrip(".").rsplit(None, 1)[-1] if text.strip(". ") else ""
    word = word.lstrip("\"'“‘([").lower()
    # A single capital letter is an initial ("J. K. Rowling").
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


_CLAUSE_SEMICOLON = re.compile(r"\s*[;；]\s*")
_CLAUSE_CONJUNCTION = re.compile(r",\s+(?:and|but|while|whereas|so)\s+(?=\S)", re.I)
_ZH_CLAUSE = re.compile(r"(?<=[，,])(?=但是|但|而且|并且|同时|然而|因此|所以|此外)")
_SUBJECT_START = re.compile(
    r"^(?:I|you|he|she|it|we|they|this|that|these|those|there|the|a|an|his|her|its|our|their|my|your|[A-Z][a-z]+)\b"
)
_AUXILIARY = re.compile(
    r"\b(?:is|are|was|were|be|been|am|has|have|had|do|does|did|will|would|can|could|shall|should|may|might|must|"
    r"[a-z]{2,}ed|[a-z]{3,}s)\b",
    re.I,
)


# A Chinese sentence longer than this is cut at clause boundaries (connectives, then commas). A
# shorter cap cut answers in two ("…也准备上市" | "因此64DD从上市就充满著困难"); a longer one gained
# nothing (see bench/RESULTS.md, "Design notes moved from code comments", ZH_MAX_CHARS).
ZH_MAX_CHARS = 200


def split_clauses(sentence: str, *, max_words: int = 40, max_chars: int = ZH_MAX_CHARS) -> list[str]:
    """Split a long sentence at safe clause boundaries; short sentences come back whole."""
    if is_cjk_text(sentence):
        if len(sentence) <= max_chars:
            return [sentence]
        pieces = [p for p in _CLAUSE_SEMICOLON.split(sentence) if p]
        pieces = [q for p in pieces for q in (_split_at_zh(p, max_chars) if len(p) > max_chars else [p])]
        return [p.rstrip("，,") for p in pieces if p.strip()]
    # Clauses joined by a semicolon are separate statements at any length.
    pieces = [p for p in _CLAUSE_SEMICOLON.split(sentence) if p]
    if len(pieces) > 1 and all(_is_clause(p) for p in pieces) and all(_SUBJECT_START.match(p) for p in pieces[1:]):
        return [_as_sentence(q) for p in pieces for q in split_clauses(p, max_words=max_words)]
    if len(sentence.split()) <= max_words:
        return [sentence]
    # ", and she was ..." splits only when the right half has its own subject and both halves a verb.
    for match in _CLAUSE_CONJUNCTION.finditer(sentence):
        left, right = sentence[: match.start()], sentence[match.end() :]
        if _is_clause(left) and _is_clause(right) and _SUBJECT_START.match(right):
            return [*_run_on(_as_sentence(left), max_words), *split_clauses(_as_sentence(right), max_words=max_words)]
    return _run_on(sentence, max_words)


def _run_on(text: str, max_words: int) -> list[str]:
    """Run-on text without sentence punctuation (OCR, raw transcripts) must not become one huge fact."""
    if len(text.split()) <= max_words * 3 // 2:  # ~60 words: past that a reader loses the thread anyway
        return [text]
    pieces = _pack(_split_at(text, re.compile(r"[,;:]\s")), lambda t: len(t.split()), max_words)
    return [w for piece in pieces for w in _hard_split(piece.split(), max_words, " ")]


def _pack(parts: list[str], size, limit: int) -> list[str]:
    """Consecutive parts joined into pieces of at most `limit` (a single larger part stays whole)."""
    out, current = [], ""
    for part in parts:
        if current and size(current) + size(part) > limit:
            out.append(current.strip())
            current = ""
        current += part
    return [*out, current.strip()] if current.strip() else out


def _hard_split(units: list[str], limit: int, joiner: str) -> list[str]:
    return [joiner.join(units[i : i + limit]) for i in range(0, len(units), limit)]


def _as_sentence(clause: str) -> str:
    clause = clause.strip()
    clause = clause[:1].upper() + clause[1:]
    return clause if re.search(r"[.!?…\"'”’)]$", clause) else clause + "."


def _is_clause(text: str) -> bool:
    return len(text.split()) >= 4 and bool(_AUXILIARY.search(text))


def _split_at_zh(text: str, max_chars: int) -> list[str]:
    pieces = [p for p in _ZH_CLAUSE.split(text) if p]
    if all(len(p) <= max_chars for p in pieces):
        return pieces
    # Last resort for very long run-on sentences: pack comma clauses into pieces of at most max_chars,
    # and cut a piece with no comma at all every max_chars characters.
    pieces = _pack(_split_at(text, re.compile(r"[，,]")), len, max_chars)
    return [q for p in pieces for q in (_hard_split(list(p), max_chars, "") if len(p) > 2 * max_chars else [p])]


# A form prints a value above its caption: "(702) 939-3254" / "(Registrant's telephone number)", or a
# row of values above a row of captions. The caption alone says nothing; under its value it is a label.
_CAPTION = re.compile(r"^\([^()]{3,100}\)$")
FORM_VALUE_MAX_CHARS = 100


def form_captions(text: str) -> str:
    """`text` with each value line followed by a caption line written as "caption: value" lines.

    Lines are compared cell by cell ("Nevada | 20-8143439" over "(State …) | (IRS Employer
    Identification No.)"); blank lines between a value and its caption (two blocks of one chunk)
    are skipped. A line is a caption only when every cell is wholly in parentheses."""
    lines = text.split("\n")
    out: list[str] = []
    value_at = None  # index in `out` of the last non-blank line, a candidate value
    for line in lines:
        cells = _cells(line) if line.strip() else []
        if cells and all(_CAPTION.match(c) for c in cells) and value_at is not None:
            values = _cells(out[value_at])
            if (len(values) == len(cells) and all(v and not _CAPTION.match(v) for v in values)
                    and len(out[value_at]) <= FORM_VALUE_MAX_CHARS):
                # each pair a paragraph of its own: a single line break joins lines into one sentence
                pairs = [f"{c[1:-1].strip()}: {v}" for c, v in zip(cells, values)]
                out[value_at:] = ["", "\n\n".join(pairs), ""]
                value_at = None
                continue
        out.append(line)
        if line.strip():
            value_at = len(out) - 1
    return "\n".join(out)


def table_rows(text: str) -> list[str]:
    """Rows of a table passage as 'Header: value | Header: value' lines, or [] if it is not a table."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    piped = [line for line in lines if "|" in line]
    if len(piped) < max(1, len(lines) - 1):
        return []
    if all(_is_cell_row(line) for line in piped):
        return [_normalise_row(line) for line in piped]
    # A plain pipe table: the first line is the header.
    rows = [line for line in piped if not _TABLE_SEPARATOR.match(line)]
    if len(rows) < 2:
        return []
    header = _cells(rows[0])
    if _is_label_column(rows):
        # A two-column sheet of labels ("Classification: | Structural steel"): each row is its own pair.
        return [f"{_cells(r)[0].rstrip(' :：')}: {' '.join(c for c in _cells(r)[1:] if c)}" for r in rows
                if len([c for c in _cells(r) if c]) >= 2]
    out = []
    for row in rows[1:]:
        cells = _cells(row)
        if cells == header:  # a header repeated inside the table (a page break, a second block)
            continue
        if _is_keyed_by(cells, header):
            # The parser already wrote "Header: value" cells (CSV, TSV, xlsx): prefixing them again
            # would give "Team: Team: Blues".
            out.append(_normalise_row(row))
            continue
        pairs = [f"{h}: {c}" if h else c for h, c in zip(header, cells) if c]
        if pairs:
            out.append(" | ".join(pairs))
    return out


def _is_keyed_by(cells: list[str], header: list[str]) -> bool:
    names = {h for h in header if h}
    keyed = [c for c in cells if c and any(c.startswith(f"{name}: ") for name in names)]
    return bool(keyed) and len(keyed) >= len([c for c in cells if c]) - 1


def _is_label_column(rows: list[str]) -> bool:
    firsts = [_cells(r)[0] for r in rows]
    return len(_cells(rows[0])) == 2 and sum(1 for f in firsts if f.endswith((":", "："))) >= max(2, len(rows) - 1)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _is_cell_row(line: str) -> bool:
    cells = [c for c in _cells(line) if c]
    return len(cells) >= 2 and sum(1 for c in cells if _CELL.match(c)) >= len(cells) - 1


def _normalise_row(line: str) -> str:
    return " | ".join(c for c in _cells(line) if c)
