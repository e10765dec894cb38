"""CSV/TSV files as header-aware row groups, and the table blocks every text parser renders."""

import csv
import io
import re
import sys
from collections import Counter
from pathlib import Path

from .base import Block, ParsedDocument, ParseError, Section
from .charset import decode_bytes

# A block is one retrievable unit: 20 rows with their header fit a child chunk and stay readable.
ROWS_PER_BLOCK = 20
# ...unless the rows are wide: past ~a page of text a row group stops being one retrievable unit.
BLOCK_CHARS = 3000
# A section is a parent chunk: ~200 rows of a spreadsheet-like file is about what an LLM can use at once.
ROWS_PER_SECTION = 200

_CANDIDATES = (",", ";", "\t", "|")
_NUMBER = re.compile(r"^[-+]?[$€£¥]?\s?\d[\d,. ]*%?$")


def render_table(rows: list[list[str]], header: list[str] | None, *, keyed: bool = False) -> list[Block]:
    """Table blocks of <= ROWS_PER_BLOCK rows, each starting with the header line so it reads alone.

    keyed=False renders rows as `v1 | v2`; keyed=True as `Header1: v1 | Header2: v2` (wide CSVs).
    """
    header_line = " | ".join(header) if header else ""
    if not rows:
        return (
            [Block(text=header_line, kind="table", metadata={"header": header, "row_start": 0, "row_end": 0})]
            if header
            else []
        )
    blocks: list[Block] = []
    lines: list[str] = []
    size = first = 0

    def close(last: int) -> None:
        text = "\n".join([header_line, *lines] if header_line else lines)
        blocks.append(
            Block(text=text, kind="table", metadata={"header": header or [], "row_start": first + 1, "row_end": last})
        )

    for index, row in enumerate(rows):
        if keyed and header:
            cells = [f"{name}: {value}" for name, value in zip(header, row, strict=False) if value]
            cells += [value for value in row[len(header) :] if value]
        else:
            cells = list(row)
            while cells and not cells[-1]:
                cells.pop()
        line = " | ".join(cells)
        if lines and (len(lines) >= ROWS_PER_BLOCK or size + len(line) > BLOCK_CHARS):
            close(index)
            lines, size, first = [], 0, index
        lines.append(line)
        size += len(line) + 1
    close(len(rows))
    return blocks


def sniff_delimiter(text: str, preferred: str | None = None) -> str | None:
    """The delimiter that splits the first lines into the most consistent number (>= 2) of fields."""
    lines = [line for line in text.splitlines()[:50] if line.strip()]
    if len(lines) > 3:
        lines = lines[:-1]  # the sample may end in the middle of a row
    if not lines:
        return None
    best, best_score = None, 0.0
    for delimiter in (preferred, *_CANDIDATES) if preferred else _CANDIDATES:
        try:
            widths = [len(row) for row in csv.reader(lines, delimiter=delimiter)]
        except csv.Error:
            continue
        width, count = Counter(widths).most_common(1)[0]
        if width < 2:
            continue
        # Consistency first; among equally consistent delimiters, more columns wins (";" over "," in
        # "Lorem, ipsum; dolor; amet"), and the caller's preference wins a tie.
        score = count / len(widths) + width / 1000 + (0.001 if delimiter == preferred else 0)
        if score > best_score:
            best, best_score = delimiter, score
    return best if best_score >= 0.8 else None


def _is_number(value: str) -> bool:
    return bool(_NUMBER.match(value.strip()))


def _split_header(rows: list[list[str]]) -> tuple[str, list[str] | None, list[list[str]]]:
    """(title, header, data rows): a caption row above the header is a title; a spanned second row merges."""
    title = ""
    filled = [c for c in rows[0] if c]
    if len(rows) > 2 and len(filled) == 1 and len(rows[0]) > 1 and rows[0][0] and len(rows[1]) > 1:
        title, rows = rows[0][0], rows[1:]
    first = rows[0]
    if not any(first) or any(_is_number(c) for c in first if c):
        return title, None, rows
    header = list(first)
    data = rows[1:]
    # Two-row headers ("Results" spanning "Accuracy" and "Time"): the first row has gaps, the second
    # has only labels and sits under (or right of) those gaps.
    if data and "" in header[1:]:
        sub = data[0]
        labels = [c for c in sub if c]
        if labels and not sub[0] and not any(_is_number(c) for c in labels):
            spanned, above = [], ""
            for name in header:
                above = name or above
                spanned.append(above)
            header = [
                " ".join(p for p in (spanned[i], sub[i] if i < len(sub) else "") if p) for i in range(len(header))
            ]
            data = data[1:]
    header = [name or f"Column {i + 1}" for i, name in enumerate(header)]
    return title, header, data


def parse(path: Path, *, filename: str, detected_type: str | None = None) -> ParsedDocument:
    """Parse a CSV or TSV file into sections of ROWS_PER_SECTION rows, each block a header-led row group."""
    decoded = decode_bytes(path.read_bytes())
    text = decoded.text.lstrip("\ufeff")
    if not text.strip():
        raise ParseError("The file is empty.")
    preferred = "\t" if detected_type == "tsv" or filename.lower().endswith((".tsv", ".tab")) else None
    delimiter = sniff_delimiter(text, preferred=preferred) or preferred or ","
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # long text cells are legitimate in exports
    try:
        rows = [
            [cell.strip() for cell in row] for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        ]
    except csv.Error as exc:
        raise ParseError(f"Could not read the CSV file: {exc}") from exc
    rows = [row for row in rows if any(row)]
    if not rows:
        raise ParseError("The CSV file has no rows.")
    title, header, data = _split_header(rows)
    stem = Path(filename).stem
    sections = []
    for start in range(0, max(len(data), 1), ROWS_PER_SECTION):
        chunk = data[start : start + ROWS_PER_SECTION]
        blocks = render_table(chunk, header, keyed=True)
        for block in blocks:
            block.metadata["row_start"] += start
            block.metadata["row_end"] += start
        many = len(data) > ROWS_PER_SECTION
        section_title = f"{title or filename} (rows {start + 1}–{start + len(chunk)})" if many else title or filename
        sections.append(Section(title=section_title, section_path=[stem], blocks=blocks))
    kind = "tsv" if delimiter == "\t" else "csv"
    metadata = {"encoding": decoded.encoding, "delimiter": delimiter, "rows": len(data), "columns": header or []}
    if title:
        metadata["title"] = title
    return ParsedDocument(detected_type=detected_type or kind, sections=sections, metadata=metadata)
