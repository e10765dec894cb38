"""HTML pages: charset sniffing, headings as section paths, readable tables and lists, no scripts or menus."""

import re
from collections.abc import Iterator
from pathlib import Path

import lxml.etree
import lxml.html

from .base import Block, ParsedDocument, ParseError, Section
from .charset import Decoded, canonical_charset, decode_bytes
from .tabular import render_table
from .text import Heading, build_sections, split_paragraphs

# Not content: code, styling, navigation, embedded apps and form controls.
_DROP = {
    "script", "style", "nav", "noscript", "template", "iframe", "object", "embed", "svg", "canvas",
    "button", "select", "option", "textarea", "input", "head", "title", "meta", "link", "map", "audio", "video",
}  # fmt: skip
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCKS = {
    "html", "body", "p", "div", "section", "article", "main", "header", "footer", "aside", "blockquote",
    "figure", "figcaption", "address", "center", "dl", "dt", "dd", "fieldset", "form", "details", "summary",
    "hr", "caption", "tr", "td", "th", "tbody", "thead", "tfoot", "li", "legend", "hgroup", "frameset",
}  # fmt: skip
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([\w:.-]+)""", re.I)
_XML_ENCODING = re.compile(rb"""^\s*<\?xml[^>]+encoding\s*=\s*["']([\w.:-]+)""", re.I)
_SPACES = re.compile(r"[ \t\r\n\f\v\u00a0\u200b]+")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)


def decode_html(data: bytes) -> Decoded:
    """Decode HTML bytes: BOM, then <meta charset>/XML declaration (first 4 KB), then content sniffing."""
    head = data[:4096]
    declared = _META_CHARSET.search(head) or _XML_ENCODING.search(head)
    label = declared.group(1).decode("ascii", "replace") if declared else None
    # A page that declares UTF-16 in ASCII bytes is not UTF-16 (WHATWG treats it as UTF-8).
    if label and (canonical_charset(label) or "").startswith("utf-16"):
        label = "utf-8"
    return decode_bytes(data, declared=label)


def parse_tree(text: str) -> lxml.html.HtmlElement:
    """An lxml document for HTML text; the text is re-encoded so stale charset declarations cannot mislead."""
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)
    try:
        return lxml.html.document_fromstring(text.encode("utf-8", errors="replace"), parser=parser)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise ParseError(f"Could not read the HTML file: {exc}") from exc


def _tag(el) -> str:
    return el.tag.lower() if isinstance(el.tag, str) else ""


def _hidden(el) -> bool:
    return (
        el.get("hidden") is not None
        or el.get("aria-hidden") == "true"
        or bool(_HIDDEN_STYLE.search(el.get("style") or ""))
    )


def _inline_text(el, skip: frozenset[str] = frozenset()) -> str:
    """Visible text of an element with whitespace collapsed and <br> kept as a line break."""
    parts: list[str] = []

    def walk(node) -> None:
        tag = _tag(node)
        if tag in _DROP or tag in skip or _hidden(node):
            return
        if tag == "br":
            parts.append("\n")
        elif tag in _BLOCKS or tag in _HEADINGS or tag in ("ul", "ol", "table", "pre"):
            parts.append("\n")
        if node.text and tag:
            parts.append(_SPACES.sub(" ", node.text))
        for child in node:
            walk(child)
            if child.tail:
                parts.append(_SPACES.sub(" ", child.tail))

    walk(el)
    return _join_lines(parts)


def _join_lines(parts: list[str]) -> str:
    """Source whitespace is already collapsed, so the only line breaks are <br> and block edges."""
    lines = (_SPACES.sub(" ", line).strip() for line in "".join(parts).split("\n"))
    return "\n".join(line for line in lines if line)


def _list_lines(el, depth: int = 0) -> list[str]:
    lines, number = [], 0
    for child in el:
        tag = _tag(child)
        if tag in ("ul", "ol"):
            lines += _list_lines(child, depth + 1)
        elif tag == "li" and not _hidden(child):
            number += 1
            marker = f"{number}." if _tag(el) == "ol" else "-"
            text = _inline_text(child, skip=frozenset({"ul", "ol"})).replace("\n", " ")
            if text:
                lines.append(f"{'  ' * depth}{marker} {text}")
            for nested in _outer_lists(child):
                lines += _list_lines(nested, depth + 1)
    return lines


def _outer_lists(el) -> Iterator:
    for node in el:
        if _tag(node) in ("ul", "ol"):
            yield node
        elif _tag(node) not in _DROP:
            yield from _outer_lists(node)


def _table_grid(table) -> tuple[list[list[str]], int]:
    """Rows of cell texts with colspan/rowspan expanded, and how many leading rows are headers."""
    grid: list[list[str]] = []
    carry: dict[int, tuple[int, str]] = {}  # column -> (rows still spanned, text)
    header_rows, in_header = 0, True
    for tr in table.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr"):
        cells = tr.xpath("./td | ./th")
        row: list[str] = []
        is_header = bool(cells) and (_tag(tr.getparent()) == "thead" or all(_tag(c) == "th" for c in cells))
        queue = iter(cells)
        column = 0
        while True:
            if column in carry:
                left, text = carry[column]
                row.append(text)
                carry[column] = (left - 1, text)
                if left <= 1:
                    del carry[column]
                column += 1
                continue
            cell = next(queue, None)
            if cell is None:
                break
            text = _inline_text(cell).replace("\n", " ")
            span = _span(cell.get("colspan"))
            for offset in range(span):
                # Header labels repeat across their span so merged headers read "Results Accuracy".
                row.append(text if offset == 0 or is_header else "")
            rowspan = _span(cell.get("rowspan"))
            if rowspan > 1:
                for offset in range(span):
                    carry[column + offset] = (rowspan - 1, text)
            column += span
        if not any(row):
            continue
        grid.append(row)
        if in_header and is_header:
            header_rows += 1
        else:
            in_header = False
    return grid, header_rows


def _span(value: str | None) -> int:
    try:
        return max(1, min(int(value or 1), 100))  # a colspan of 10000 is an attack, not a layout
    except ValueError:
        return 1


def _table_blocks(table) -> list[Block]:
    grid, header_rows = _table_grid(table)
    if not grid:
        return []
    width = max(len(row) for row in grid)
    grid = [row + [""] * (width - len(row)) for row in grid]
    keep = [i for i in range(width) if any(row[i] for row in grid)]
    grid = [[row[i] for i in keep] for row in grid]
    header = None
    if header_rows:
        merged = []
        for column in zip(*grid[:header_rows], strict=True):
            labels: list[str] = []
            for label in column:
                if label and label not in labels:
                    labels.append(label)
            merged.append(" ".join(labels))
        header = [label or f"Column {i + 1}" for i, label in enumerate(merged)]
    caption = table.find("caption")
    blocks = render_table(grid[header_rows:], header)
    if caption is not None and (text := _inline_text(caption)):
        for block in blocks:
            block.metadata["caption"] = text
            block.text = f"{text}\n{block.text}"
    return blocks


def _is_layout_table(table) -> bool:
    rows = table.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr")
    most_cells = max((len(tr.xpath("./td | ./th")) for tr in rows), default=0)
    return most_cells <= 1 or bool(table.xpath(".//h1 | .//h2 | .//h3 | .//h4 | .//h5 | .//h6"))


def html_items(root) -> Iterator[Heading | Block]:
    """Headings and blocks of an HTML document in reading order."""
    paragraph: list[str] = []

    def flush() -> Iterator[Block]:
        text = _join_lines(paragraph)
        paragraph.clear()
        if text:
            yield Block(text=text)

    def walk(el) -> Iterator[Heading | Block]:
        tag = _tag(el)
        if tag in _DROP or _hidden(el):
            return
        if tag in _HEADINGS:
            yield from flush()
            yield Heading(_HEADINGS[tag], _inline_text(el).replace("\n", " "))
        elif tag in ("ul", "ol"):
            yield from flush()
            if lines := _list_lines(el):
                yield Block(text="\n".join(lines), kind="list")
        elif tag == "pre":
            yield from flush()
            text = el.text_content()
            if el.find(".//code") is not None:
                yield Block(text=text.strip("\n"), kind="code")
            else:
                yield from (Block(text=p) for p in split_paragraphs(text))
        elif tag == "table" and not _is_layout_table(el):
            yield from flush()
            yield from _table_blocks(el)
        elif tag == "br":
            paragraph.append("\n")
        else:
            block = tag in _BLOCKS or tag == "table"
            if block:
                yield from flush()
            if el.text and tag:
                paragraph.append(_SPACES.sub(" ", el.text))
            for child in el:
                yield from walk(child)
                if child.tail:
                    paragraph.append(_SPACES.sub(" ", child.tail))
            if block:
                yield from flush()

    yield from walk(root)
    yield from flush()


def document_title(root) -> str:
    title = root.find(".//title")
    return _SPACES.sub(" ", title.text_content()).strip() if title is not None else ""


def html_blocks(text: str) -> list[Block]:
    """An HTML fragment (an email body) as flat blocks, headings kept as paragraphs."""
    items = html_items(parse_tree(text))
    return [item if isinstance(item, Block) else Block(text=item.text) for item in items]


def html_sections(root, *, filename: str) -> list[Section]:
    title = document_title(root)
    return build_sections(html_items(root), title=title or filename, path=[title or Path(filename).stem])


def parse(path: Path, *, filename: str) -> ParsedDocument:
    """Parse an HTML file: one section per heading, tables as header-led row groups."""
    decoded = decode_html(path.read_bytes())
    if not decoded.text.strip():
        raise ParseError("The file is empty.")
    try:
        root = parse_tree(decoded.text)
        sections = html_sections(root, filename=filename)
    except RecursionError as exc:
        raise ParseError("Could not read the HTML file: it is nested too deeply.") from exc
    if not sections:
        raise ParseError("The HTML file contains no readable text.")
    metadata = {"encoding": decoded.encoding}
    if title := document_title(root):
        metadata["title"] = title
    return ParsedDocument(detected_type="html", sections=sections, metadata=metadata)
