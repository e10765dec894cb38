"""Where a cited chunk sits in its original: which rows of a sheet, which cues of a transcript.

Pure functions over what the original holds and the chunk's text. Chunks keep their sheet, slide
and times but not their row numbers, so rows are found by the text the parser wrote for them:
"Header: value | Header: value" for a table row, the cells joined by spaces for a note line.
"""

import re

# A transcript cue belongs to a chunk when it starts inside the chunk's time span (the parser's
# cue times are written with millisecond precision; a little slack absorbs float rounding).
TIME_SLACK_SECONDS = 0.01


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


# Lines of the sheet's chunks looked at for each row before the row counts as cited by none
# (a header repeated at a page break, a caption the parser moved): enough to step over those.
LOOKAHEAD_LINES = 5


def _data_lines(text: str) -> list[str]:
    """A sheet chunk's row lines, its header lines ("Name | Amount", no "name: value") left out."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    return [line for line in lines if " | " not in line or all(": " in part for part in line.split(" | "))]


def _row_matches(filled: list[str], line: str) -> bool:
    segments = line.split(" | ")
    if len(segments) > 1:
        return len(segments) == len(filled) and all(seg.endswith(": " + cell) for seg, cell in zip(segments, filled))
    return " ".join(filled) == line


def cited_rows(rows: list[tuple[int, list[str]]], sheet_chunks: list[tuple[int, str]], cited_ids: set[int]) -> list[int]:
    """Numbers of the sheet rows that the chunks `cited_ids` hold.

    `sheet_chunks`: (id, text) of the sheet's child chunks in order. The parser writes rows in
    order into consecutive chunks, so rows and row lines are aligned in order: a sheet of identical
    rows still has each chunk's own rows found, not every row that looks the same.
    """
    lines = [(chunk_id, line) for chunk_id, text in sheet_chunks for line in _data_lines(text)]
    cited, at = [], 0
    for number, cells in rows:
        filled = [cell for cell in cells if cell]
        if not filled:
            continue
        for offset in range(at, min(at + LOOKAHEAD_LINES, len(lines))):
            chunk_id, line = lines[offset]
            if _row_matches(filled, line):
                if chunk_id in cited_ids:
                    cited.append(number)
                at = offset + 1
                break
    return cited


def cited_cues(cues, start: float | None, end: float | None, chunk_text: str) -> list[int]:
    """Indexes of the cues that start inside the chunk's span and whose text the chunk holds."""
    if start is None:
        return []
    end = start if end is None else end
    text = _squeeze(chunk_text)
    return [i for i, cue in enumerate(cues)
            if start - TIME_SLACK_SECONDS <= cue.start <= end + TIME_SLACK_SECONDS and _squeeze(cue.text) in text]


def cue_at(cues, seconds: float) -> list[int]:
    """The cue playing at `seconds` (or the first one starting after it)."""
    playing = [i for i, cue in enumerate(cues) if cue.start <= seconds <= cue.end]
    if playing:
        return playing[:1]
    after = [i for i, cue in enumerate(cues) if cue.start >= seconds]
    return after[:1]


def cited_attachment(section_path: list[str]) -> str:
    """The attachment a chunk of an email cites ("Attachment: <name>" in its path), or '' for the message."""
    for part in section_path[1:2]:
        if isinstance(part, str) and part.startswith("Attachment: "):
            return part.removeprefix("Attachment: ")
    return ""
