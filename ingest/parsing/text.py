"""Plain text and Markdown files, and the heading-to-section builder the other markup parsers share."""

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .base import Block, ParsedDocument, ParseError, Section
from .charset import decode_bytes
from .tabular import render_table

# About one printed page (~500 English words). Text without headings is cut into sections this size,
# and a heading's section longer than two pages is cut the same way so a parent chunk stays usable.
PAGE_CHARS = 3000

MARKDOWN_TYPES = {"md", "markdown", "mdown", "mkd"}

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_TABLE_RULE = re.compile(r"^ {0,3}\|?\s*:?-+:?\s*([|+]\s*:?-+:?\s*)*\|?\s*$")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+\S")
_THEMATIC_BREAK = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s*")


@dataclass
class Heading:
    level: int
    text: str


def split_paragraphs(text: str) -> list[str]:
    return [p.strip("\n") for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def split_long_text(text: str, limit: int = PAGE_CHARS) -> list[str]:
    """Cut text longer than `limit` at line breaks, then sentence ends, then anywhere."""
    if len(text) <= limit:
        return [text]
    for pattern in ("\n", _SENTENCE_END, " "):
        pieces = re.split(pattern, text) if isinstance(pattern, re.Pattern) else text.split(pattern)
        if len(pieces) > 1:
            joiner = "" if isinstance(pattern, re.Pattern) else pattern
            break
    else:
        return [text[i : i + limit] for i in range(0, len(text), limit)]
    parts, current = [], ""
    for piece in pieces:
        candidate = f"{current}{joiner}{piece}" if current else piece
        if len(candidate) > limit and current:
            parts.append(current)
            candidate = piece
        current = candidate
    parts.append(current)
    return [p for part in parts for p in split_long_text(part, limit) if p.strip()]


def paginate(title: str, path: list[str], blocks: list[Block], *, max_chars: int, **fields) -> list[Section]:
    """One section, or several of ~PAGE_CHARS each (same path, metadata part) when over max_chars."""
    pieces = []
    for block in blocks:
        texts = split_long_text(block.text) if block.kind not in ("table", "cue") else [block.text]
        pieces += [block] if len(texts) == 1 else [_copy(block, text) for text in texts]
    if sum(len(b.text) for b in pieces) <= max_chars:
        return [Section(title=title, section_path=list(path), blocks=pieces, **fields)]
    groups: list[list[Block]] = [[]]
    size = 0
    for block in pieces:
        if groups[-1] and size + len(block.text) > PAGE_CHARS:
            groups.append([])
            size = 0
        groups[-1].append(block)
        size += len(block.text)
    return [
        Section(title=title, section_path=list(path), blocks=group, metadata={"part": n}, **fields)
        for n, group in enumerate(groups, start=1)
    ]


def _copy(block: Block, text: str) -> Block:
    return Block(text=text, kind=block.kind, page=block.page, speaker=block.speaker, metadata=dict(block.metadata))


def build_sections(items: Iterable[Heading | Block], *, title: str, path: list[str]) -> list[Section]:
    """Sections from a stream of headings and blocks; a heading's section path is its ancestors' titles.

    Content before the first heading gets `title`/`path`. A heading with no content of its own and no
    subheadings becomes a one-paragraph section, so its words are not lost.
    """
    sections: list[Section] = []
    stack: list[Heading] = []
    blocks: list[Block] = []
    current_title, current_path = title, list(path)

    def close(next_level: int | None) -> None:
        if not blocks and stack and (next_level is None or next_level <= stack[-1].level):
            blocks.append(Block(text=stack[-1].text))
        if blocks:
            sections.extend(paginate(current_title, current_path, blocks, max_chars=2 * PAGE_CHARS))

    for item in items:
        if isinstance(item, Heading):
            if not item.text:
                continue
            close(item.level)
            blocks = []
            while stack and stack[-1].level >= item.level:
                stack.pop()
            stack.append(item)
            current_title, current_path = item.text, [h.text for h in stack]
        elif item.text.strip():
            blocks.append(item)
    close(None)
    return sections


def _table_cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)]


def markdown_items(text: str) -> Iterator[Heading | Block]:
    """Headings and blocks (paragraph, list, code, table) of a Markdown document, in order."""
    lines = text.split("\n")
    i, n = 0, len(lines)
    if lines and lines[0].strip() == "---":  # YAML front matter is metadata, not content
        end = next((j for j in range(1, min(n, 200)) if lines[j].strip() in ("---", "...")), None)
        i = end + 1 if end else 0
    paragraph: list[str] = []

    def flush() -> Iterator[Block]:
        if paragraph:
            yield Block(text="\n".join(line.strip() for line in paragraph))
            paragraph.clear()

    while i < n:
        line = lines[i]
        if fence := _FENCE.match(line):
            yield from flush()
            marker, body = fence.group(1), []
            i += 1
            while i < n and not lines[i].strip().startswith(marker[0] * len(marker)):
                body.append(lines[i])
                i += 1
            yield Block(text="\n".join(body).strip("\n"), kind="code", metadata={"language": fence.group(2)})
        elif heading := _ATX.match(line):
            yield from flush()
            yield Heading(len(heading.group(1)), (heading.group(2) or "").strip())
        elif paragraph and _SETEXT.match(line) and not _LIST_ITEM.match(paragraph[0]):
            yield Heading(1 if line.strip()[0] == "=" else 2, " ".join(p.strip() for p in paragraph))
            paragraph.clear()
        elif "|" in line and i + 1 < n and _TABLE_RULE.match(lines[i + 1]) and "-" in lines[i + 1]:
            yield from flush()
            header, rows = _table_cells(line), []
            i += 2
            while i < n and "|" in lines[i] and lines[i].strip():
                rows.append(_table_cells(lines[i]))
                i += 1
            yield from render_table(rows, header)
            continue
        elif _LIST_ITEM.match(line) and not paragraph and not _THEMATIC_BREAK.match(line):
            items = [line]
            i += 1
            # A list runs on through indented or lazy continuation lines, and over a blank line when
            # the list resumes or the next line is indented under it.
            while i < n:
                nxt = lines[i]
                if not nxt.strip():
                    if i + 1 < n and (_LIST_ITEM.match(lines[i + 1]) or lines[i + 1][:1] in (" ", "\t")):
                        items.append("")
                        i += 1
                        continue
                    break
                if _ATX.match(nxt) or _FENCE.match(nxt) or _THEMATIC_BREAK.match(nxt):
                    break
                items.append(nxt)  # an item, an indented continuation or a lazy continuation line
                i += 1
            yield Block(text="\n".join(items).strip("\n"), kind="list")
            continue
        elif not line.strip() or _THEMATIC_BREAK.match(line):
            yield from flush()
        elif line.startswith("    ") and not paragraph:
            body = []
            while i < n and (lines[i].startswith("    ") or not lines[i].strip()):
                body.append(lines[i][4:])
                i += 1
            yield Block(text="\n".join(body).strip("\n"), kind="code")
            continue
        else:
            paragraph.append(re.sub(r"^ {0,3}> ?", "", line))
        i += 1
    yield from flush()


def text_sections(text: str, *, filename: str) -> list[Section]:
    """Plain text: paragraphs split on blank lines, grouped into page-size sections."""
    blocks = [Block(text=p) for p in split_paragraphs(text)]
    return paginate(filename, [Path(filename).stem], blocks, max_chars=PAGE_CHARS)


def markdown_sections(text: str, *, filename: str) -> list[Section]:
    return build_sections(markdown_items(text), title=filename, path=[Path(filename).stem])


def parse(path: Path, *, filename: str, detected_type: str | None = None) -> ParsedDocument:
    """Parse a .txt or Markdown file (which one: detected_type, else the extension)."""
    decoded = decode_bytes(path.read_bytes())
    text = decoded.text.lstrip("\ufeff")
    if not text.strip():
        raise ParseError("The file is empty.")
    kind = detected_type or ("md" if Path(filename).suffix.lower().lstrip(".") in MARKDOWN_TYPES else "txt")
    sections = markdown_sections(text, filename=filename) if kind == "md" else text_sections(text, filename=filename)
    if not sections:
        raise ParseError("The file contains no readable text.")
    return ParsedDocument(detected_type=kind, sections=sections, metadata={"encoding": decoded.encoding})
