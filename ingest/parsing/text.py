"""Plain text, Markdown, reStructuredText and Org files, and the heading-to-section builder parsers share."""

import re
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .base import Block, ParsedDocument, ParseError, Section
from .charset import decode_bytes
from .tabular import render_table

# About one printed page (~500 English words). Text without headings is cut into sections this size,
# and a heading's section longer than two pages is cut the same way so a parent chunk stays usable.
PAGE_CHARS = 3000

_EXTENSION_KINDS = {"md": "md", "markdown": "md", "mdown": "md", "mkd": "md", "rst": "rst", "org": "org"}

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_TABLE_RULE = re.compile(r"^ {0,3}\|?\s*:?-+:?\s*([|+]\s*:?-+:?\s*)*\|?\s*$")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+\S")
_THEMATIC_BREAK = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])")


@dataclass
class Heading:
    level: int
    text: str


def split_paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs, each dedented (keeping its inner indentation) and stripped."""
    return [textwrap.dedent(p).strip() for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def split_long_text(text: str, limit: int = PAGE_CHARS) -> list[str]:
    """Cut text longer than `limit` at line breaks, then sentence ends, then anywhere."""
    if len(text) <= limit:
        return [text]
    for pattern in ("\n", _SENTENCE_END, " "):
        # Sentence pieces keep their own spacing, so they rejoin with "".
        pieces = [p for p in pattern.split(text) if p] if isinstance(pattern, re.Pattern) else text.split(pattern)
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
            closing = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
            i += 1
            while i < n and not closing.match(lines[i]):
                body.append(lines[i])
                i += 1
            code = textwrap.dedent("\n".join(body)).strip("\n")
            yield Block(text=code, kind="code", metadata={"language": fence.group(2)})
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


_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}\s*$")
_RST_INLINE = (
    (re.compile(r"`([^`<]+?)\s*<[^>]+>`__?"), r"\1"),  # `text <url>`_
    (re.compile(r":[\w:+-]+:`([^`]+)`"), r"\1"),  # :role:`text`
    (re.compile(r"``([^`]+)``"), r"\1"),
    (re.compile(r"`([^`]+)`_{0,2}"), r"\1"),
)
_RST_CODE_DIRECTIVE = re.compile(r"^\.\.\s+(?:code|code-block|sourcecode)::\s*(\S*)", re.I)


def _indented_block(lines: list[str], i: int) -> tuple[list[str], int]:
    """The indented lines from i on (blank lines included), dedented, and the index after them."""
    body = []
    while i < len(lines) and (not lines[i].strip() or lines[i][:1] in " \t"):
        body.append(lines[i])
        i += 1
    return textwrap.dedent("\n".join(body)).strip("\n").split("\n"), i


def rst_to_markdown(text: str) -> str:
    """reStructuredText -> the Markdown subset markdown_items reads: headings, code, lists, paragraphs."""
    lines, out, styles = text.split("\n"), [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        over = _RST_ADORNMENT.match(line)
        title_at = i + 1 if over and nxt.strip() and i + 2 < len(lines) else i
        under = lines[title_at + 1] if title_at + 1 < len(lines) else ""
        title = lines[title_at].strip()
        if title and not _RST_ADORNMENT.match(lines[title_at]) and _RST_ADORNMENT.match(under):
            if len(under.strip()) >= min(len(title), 3) and (not over or over.group(1) == under[0]):
                style = (under[0], bool(over))  # levels follow the order styles first appear in
                if style not in styles:
                    styles.append(style)
                out += ["", "#" * min(styles.index(style) + 1, 6) + " " + title, ""]
                i = title_at + 2
                continue
        if directive := _RST_CODE_DIRECTIVE.match(line):
            body, i = _indented_block(lines, i + 1)
            body = [b for b in body if not b.startswith(":")]  # directive options
            out += ["```" + directive.group(1), *body, "```"]
            continue
        if line.startswith(".. "):  # comments, targets, substitutions, images: not prose
            i = _indented_block(lines, i + 1)[1]
            continue
        if line.rstrip().endswith("::") and nxt.strip() == "":
            out.append(re.sub(r"\s*::$", ":", line.strip()) if line.strip() != "::" else "")
            body, i = _indented_block(lines, i + 1)
            out += ["```", *body, "```"]
            continue
        stripped = re.sub(r"^(\s*)#\.\s", r"\g<1>1. ", line).strip()
        for pattern, repl in _RST_INLINE:
            stripped = pattern.sub(repl, stripped)
        out.append(stripped)
        i += 1
    return "\n".join(out)


_ORG_HEADING = re.compile(r"^(\*+)\s+(?:(?:TODO|DONE)\s+)?(?:\[#\w\]\s+)?(.*?)(?:\s+:[\w@#%:]+:)?\s*$")
_ORG_INLINE = (
    (re.compile(r"\[\[[^\]]+\]\[([^\]]+)\]\]"), r"\1"),  # [[link][description]]
    (re.compile(r"\[\[([^\]]+)\]\]"), r"\1"),
    (re.compile(r"(?<!\w)[~=]([^~=\s](?:[^~=]*[^~=\s])?)[~=](?!\w)"), r"\1"),  # ~code~ =verbatim=
)


def org_to_markdown(text: str) -> tuple[str, str]:
    """Org mode -> (the Markdown subset markdown_items reads, #+TITLE)."""
    out, title, in_block, in_drawer = [], "", False, False
    for line in text.split("\n"):
        stripped = line.strip()
        lowered = stripped.lower()
        if in_block:
            if lowered.startswith(("#+end_src", "#+end_example")):
                out.append("```")
                in_block = False
            else:
                out.append(line)
        elif lowered.startswith(("#+begin_src", "#+begin_example")):
            out.append("```" + (stripped.split()[1] if len(stripped.split()) > 1 else ""))
            in_block = True
        elif lowered.startswith("#+title:"):
            title = stripped[8:].strip()
        elif lowered.startswith("#+") or stripped == "#" or stripped.startswith("# "):
            continue  # keywords, block markers and comments
        elif re.fullmatch(r":[\w-]+:", stripped):  # :PROPERTIES: ... :END: drawers
            in_drawer = lowered != ":end:"
        elif in_drawer:
            continue
        elif heading := _ORG_HEADING.match(line):
            out += ["", "#" * min(len(heading.group(1)), 6) + " " + heading.group(2), ""]
        else:
            for pattern, repl in _ORG_INLINE:
                stripped = pattern.sub(repl, stripped)
            out.append(stripped)
    return "\n".join(out), title


def text_sections(text: str, *, filename: str) -> list[Section]:
    """Plain text: paragraphs split on blank lines, grouped into page-size sections."""
    blocks = [Block(text=p) for p in split_paragraphs(text)]
    return paginate(filename, [Path(filename).stem], blocks, max_chars=PAGE_CHARS)


def markdown_sections(text: str, *, filename: str) -> list[Section]:
    return build_sections(markdown_items(text), title=filename, path=[Path(filename).stem])


def parse(path: Path, *, filename: str, detected_type: str | None = None) -> ParsedDocument:
    """Parse a .txt, Markdown, reStructuredText or Org file (which one: detected_type, else the extension)."""
    decoded = decode_bytes(path.read_bytes())
    text = decoded.text.lstrip("\ufeff")
    if not text.strip():
        raise ParseError("The file is empty.")
    kind = detected_type or _EXTENSION_KINDS.get(Path(filename).suffix.lower().lstrip("."), "txt")
    metadata = {"encoding": decoded.encoding}
    stem = Path(filename).stem
    if kind == "md":
        sections = markdown_sections(text, filename=filename)
    elif kind == "rst":
        sections = build_sections(markdown_items(rst_to_markdown(text)), title=filename, path=[stem])
    elif kind == "org":
        markdown, title = org_to_markdown(text)
        if title:
            metadata["title"] = title
        sections = build_sections(markdown_items(markdown), title=title or filename, path=[title or stem])
    else:
        sections = text_sections(text, filename=filename)
    if not sections:
        raise ParseError("The file contains no readable text.")
    return ParsedDocument(detected_type=kind, sections=sections, metadata=metadata)
