"""Structure-first chunking: a parent per section, children packed from its blocks (100–400 tokens)."""

import re
from dataclasses import dataclass, field

from ingest.parsing.base import Block, ParsedDocument, Section
from extraction.tokens import count_tokens, encoding

# Retrieval-sized children: big enough to carry a fact with its context, small enough that a
# hit points at the answer. 400 is the upper bound the issue sets; blocks below MIN are packed
# with their neighbours of the same kind.
CHILD_MAX_TOKENS = 400
CHILD_MIN_TOKENS = 100
# Past this, a unit is cut into CHILD_MAX_TOKENS windows even inside a "sentence".
HARD_MAX_TOKENS = 2 * CHILD_MAX_TOKENS
# A parent is context for its children; very long sections are cut so a parent stays readable.
PARENT_MAX_TOKENS = 2000

_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])[\"'”’」)]?\s+|(?<=[。！？；])")


@dataclass
class ChildSpec:
    text: str
    tokens: int
    page: int | None = None
    start_time: float | None = None
    end_time: float | None = None
    speaker: str = ""
    kind: str = "paragraph"
    # Cues packed into this child, as [character offset in `text`, start_time, end_time]: a fact cites
    # the cue it was said in, not the whole window (retrieval/results.py). Empty for other kinds.
    cues: list = field(default_factory=list)


@dataclass
class ParentSpec:
    title: str
    section_path: list[str]
    children: list[ChildSpec]
    page: int | None = None
    slide: int | None = None
    sheet: str = ""
    start_time: float | None = None
    end_time: float | None = None
    metadata: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        heading = " › ".join(self.section_path) if self.section_path else self.title
        body = "\n\n".join(c.text for c in self.children)
        return f"{heading}\n\n{body}" if heading and not body.startswith(heading) else body

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.children)


def chunk_document(parsed: ParsedDocument) -> list[ParentSpec]:
    parents: list[ParentSpec] = []
    for section in parsed.sections:
        children = _pack(_pieces(section.blocks))
        if not children:
            continue
        for group in _split_parent(children):
            parents.append(_parent(section, group))
    return parents


def _parent(section: Section, children: list[ChildSpec]) -> ParentSpec:
    times = [c.start_time for c in children if c.start_time is not None]
    ends = [c.end_time for c in children if c.end_time is not None]
    pages = [c.page for c in children if c.page is not None]
    return ParentSpec(
        title=section.title,
        section_path=list(section.section_path),
        children=children,
        page=section.page if section.page is not None else (pages[0] if pages else None),
        slide=section.slide,
        sheet=section.sheet,
        start_time=section.start_time if section.start_time is not None else (min(times) if times else None),
        end_time=section.end_time if section.end_time is not None else (max(ends) if ends else None),
        metadata=dict(section.metadata),
    )


def _pieces(blocks: list[Block]) -> list[ChildSpec]:
    """Blocks as child-sized pieces: long blocks split at sentence (or row) boundaries."""
    pieces = []
    for block in blocks:
        text = block.text.replace("\x00", "").strip()  # PostgreSQL text cannot hold NUL
        if not text:
            continue
        tokens = count_tokens(text)
        if tokens <= CHILD_MAX_TOKENS:
            pieces.append(_spec(block, text, tokens))
            continue
        for part in _split_long(text, is_table=block.kind == "table"):
            pieces.append(_spec(block, part, count_tokens(part)))
    return pieces


def _spec(block: Block, text: str, tokens: int) -> ChildSpec:
    cues = [[0, block.start_time, block.end_time]] if block.kind == "cue" else []
    return ChildSpec(text, tokens, block.page, block.start_time, block.end_time, block.speaker, block.kind, cues)


def _split_long(text: str, *, is_table: bool) -> list[str]:
    """Split at sentence ends (rows for tables, repeating the header) into ≤ CHILD_MAX_TOKENS parts."""
    if is_table:
        header, *rows = text.split("\n")
        units, prefix = rows, header + "\n"
    else:
        units = [u for u in _SENTENCE_END.split(text) if u and u.strip()]
        prefix = ""
    parts, current, current_tokens = [], [], count_tokens(prefix)
    for unit in units:
        unit_tokens = count_tokens(unit)
        if current and current_tokens + unit_tokens > CHILD_MAX_TOKENS:
            parts.append(prefix + _join(current, is_table))
            current, current_tokens = [], count_tokens(prefix)
        current.append(unit)
        current_tokens += unit_tokens
    if current:
        parts.append(prefix + _join(current, is_table))
    # A sentence a little over the limit stays whole; a "sentence" many times over it (a CSV cell of
    # 10,000 tokens, text with no punctuation) is no sentence, and is cut into windows.
    return [window for part in parts for window in _windows(part)]


def _windows(text: str) -> list[str]:
    if count_tokens(text) <= HARD_MAX_TOKENS:
        return [text]
    tokens = encoding().encode(text, disallowed_special=())
    return [encoding().decode(tokens[i:i + CHILD_MAX_TOKENS]) for i in range(0, len(tokens), CHILD_MAX_TOKENS)]


def _join(units: list[str], is_table: bool) -> str:
    if is_table:
        return "\n".join(units)
    joined = ""
    for unit in units:
        unit = unit.strip()
        # CJK sentences join without a space; Latin ones with one.
        joined += unit if not joined or _is_cjk(joined[-1]) else " " + unit
    return joined


def _is_cjk(char: str) -> bool:
    return "\u3000" <= char <= "\u9fff" or "\uff00" <= char <= "\uffef"


# A table's caption ("Hardness of grade SNB22-3" above the hardness table) is one short line without
# a sentence end; alone it was a chunk that matched the question best and held no answer.
CAPTION_MAX_TOKENS = 30
_ENDS_SENTENCE = re.compile(r"[.!?。！？;；]\s*$")


def _is_caption(piece: ChildSpec) -> bool:
    text = piece.text.strip()
    return (piece.kind in _PROSE and piece.tokens <= CAPTION_MAX_TOKENS and "\n" not in text
            and not _ENDS_SENTENCE.search(text))


def _pack(pieces: list[ChildSpec]) -> list[ChildSpec]:
    """Merge consecutive small pieces of the same kind (and speaker) up to CHILD_MAX_TOKENS; a
    caption line joins the table after it."""
    packed: list[ChildSpec] = []
    for piece in pieces:
        last = packed[-1] if packed else None
        if (last is not None and piece.kind == "table" and _is_caption(last)
                and last.tokens + piece.tokens <= CHILD_MAX_TOKENS):
            # table_rows (extraction) reads one line without cells above the rows as no row.
            last.text = f"{last.text.strip()}\n{piece.text}"
            last.tokens += piece.tokens
            last.kind = "table"
            if last.page is None:
                last.page = piece.page
            continue
        if (
            last is not None
            and last.tokens < CHILD_MIN_TOKENS
            and _family(last.kind) == _family(piece.kind)
            and last.tokens + piece.tokens <= CHILD_MAX_TOKENS
            and (piece.kind != "cue" or last.speaker == piece.speaker or not piece.speaker)
        ):
            sep = "\n" if piece.kind in ("cue", "table") else "\n\n"
            offset = len(last.text) + len(sep)
            last.cues += [[offset + at, start, end] for at, start, end in piece.cues]
            last.text = f"{last.text}{sep}{piece.text}"
            last.tokens += piece.tokens
            last.end_time = piece.end_time if piece.end_time is not None else last.end_time
            if last.page is None:
                last.page = piece.page
            continue
        packed.append(ChildSpec(**{**vars(piece), "cues": [list(c) for c in piece.cues]}))
    return packed


_PROSE = {"paragraph", "list", "header", "caption", "notes", "heading"}


def _family(kind: str) -> str:
    """Prose blocks pack together; tables, code and cues only with their own kind."""
    return "prose" if kind in _PROSE else kind


def _split_parent(children: list[ChildSpec]) -> list[list[ChildSpec]]:
    groups, current, tokens = [], [], 0
    for child in children:
        if current and tokens + child.tokens > PARENT_MAX_TOKENS:
            groups.append(current)
            current, tokens = [], 0
        current.append(child)
        tokens += child.tokens
    if current:
        groups.append(current)
    return groups
