"""Word parser: .docx with python-docx (body order, heading paths, lists, tables); .doc via LibreOffice."""

import re
from pathlib import Path

import docx
from docx.oxml.ns import qn
from docx.table import Table
from docx.text.paragraph import Paragraph

from . import office
from .base import Block, ParsedDocument, ParseError, Section, TransientParseError

# Rows per table block: big enough to keep a small table whole, small enough for one child chunk.
TABLE_ROWS_PER_BLOCK = 20

_LIST_STYLE = re.compile(r"^List(?: Bullet| Number| Continue| Paragraph)?(?: (\d))?$")
_HEADING_STYLE = re.compile(r"^(?:heading|标题)\s*(\d)$", re.IGNORECASE)
_P, _TBL, _SDT = qn("w:p"), qn("w:tbl"), qn("w:sdt")


def parse(path: Path, *, filename: str) -> ParsedDocument:
    """Parse a .docx into sections by heading style, keeping paragraphs and tables in body order."""
    office.reject_encrypted(path, "Word document")
    try:
        document = docx.Document(str(path))
    except Exception as exc:  # python-docx raises KeyError, BadZipFile, lxml errors… for broken packages
        raise ParseError("The Word document is damaged or not a .docx file.") from exc
    try:
        return _parse_document(document, filename)
    except (ParseError, TransientParseError):
        raise
    except Exception as exc:
        raise ParseError(f"The Word document could not be read ({type(exc).__name__}).") from exc


def parse_doc(path: Path, *, filename: str) -> ParsedDocument:
    """Parse a legacy .doc by converting it to .docx with LibreOffice (OOXML misnamed .doc is read directly)."""
    return office.parse_legacy(path, filename=filename, legacy="doc", kind="Word document", parse=parse)


def table_blocks(rows: list[list[str]], *, page: int | None = None) -> list[Block]:
    """Render a table as "a | b" lines, the header row repeated at the top of every group of rows."""
    rows = [[" ".join(str(cell or "").split()) for cell in row] for row in rows]
    rows = [row for row in rows if any(row)]
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    if not body:
        return [Block(" | ".join(header), kind="table", page=page)]
    blocks = []
    for start in range(0, len(body), TABLE_ROWS_PER_BLOCK):
        group = [header, *body[start : start + TABLE_ROWS_PER_BLOCK]]
        blocks.append(Block("\n".join(" | ".join(row) for row in group), kind="table", page=page))
    return blocks


def _parse_document(document, filename: str) -> ParsedDocument:
    props = document.core_properties
    title = (props.title or "").strip() or Path(filename).stem
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    current = Section(title=title, section_path=[])
    list_lines: list[str] = []
    style_levels: dict[str, int | None] = {}

    def flush_list():
        if list_lines:
            current.blocks.append(Block("\n".join(list_lines), kind="list"))
            list_lines.clear()

    for element in _body_elements(document.element.body):
        if element.tag == _TBL:
            flush_list()
            current.blocks.extend(table_blocks(_table_rows(Table(element, document._body))))
            continue
        paragraph = Paragraph(element, document._body)
        text = paragraph.text.strip()
        if not text:
            continue
        level = _heading_level(paragraph, style_levels)
        if level is not None:
            flush_list()
            sections.append(current)
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, text))
            current = Section(title=text, section_path=[t for _, t in stack])
            continue
        list_level = _list_level(paragraph)
        if list_level is None:
            flush_list()
            current.blocks.append(Block(text))
        else:
            list_lines.append("  " * list_level + "- " + text)
    flush_list()
    sections.append(current)

    metadata: dict = {"title": title}
    if props.author:
        metadata["author"] = props.author
    metadata.update(_headers_and_footers(document))
    sections = [section for section in sections if section.blocks]
    if not sections:
        raise ParseError("The Word document contains no text.")
    return ParsedDocument(detected_type="docx", sections=sections, metadata=metadata)


def _body_elements(container):
    """Paragraphs and tables in document order, looking inside content controls (w:sdt)."""
    for child in container.iterchildren():
        if child.tag in (_P, _TBL):
            yield child
        elif child.tag == _SDT:
            content = child.find(qn("w:sdtContent"))
            if content is not None:
                yield from _body_elements(content)


def _heading_level(paragraph: Paragraph, cache: dict[str, int | None]) -> int | None:
    # Title sits above Heading 1, so a document title becomes the root of the heading path.
    outline = paragraph._p.find(f"{qn('w:pPr')}/{qn('w:outlineLvl')}")
    if outline is not None and (value := outline.get(qn("w:val"), "")).isdigit() and int(value) < 9:
        return int(value) + 1
    style_id = paragraph._p.style or ""
    if style_id not in cache:
        style = paragraph.style
        name = (style.name or "").strip() if style is not None else ""
        match = _HEADING_STYLE.match(name)
        level = int(match.group(1)) if match else 0 if name.lower() == "title" else None
        if level is None and style is not None:
            styled = style.element.find(f"{qn('w:pPr')}/{qn('w:outlineLvl')}")
            value = styled.get(qn("w:val"), "") if styled is not None else ""
            level = int(value) + 1 if value.isdigit() and int(value) < 9 else None
        cache[style_id] = level
    return cache[style_id]


def _list_level(paragraph: Paragraph) -> int | None:
    num_pr = paragraph._p.find(f"{qn('w:pPr')}/{qn('w:numPr')}")
    if num_pr is not None:
        ilvl = num_pr.find(qn("w:ilvl"))
        value = ilvl.get(qn("w:val"), "0") if ilvl is not None else "0"
        return int(value) if value.isdigit() else 0
    # Numbering set by the style ("List Bullet 2") nests by the style's number, not by ilvl.
    style = paragraph.style
    match = _LIST_STYLE.match(style.name or "") if style is not None else None
    return int(match.group(1) or 1) - 1 if match else None


def _table_rows(table: Table) -> list[list[str]]:
    rows = []
    for row in table.rows:
        cells, previous = [], None
        for cell in row.cells:
            # A horizontally merged cell comes back once per grid column it spans.
            if cell._tc is not previous:
                # iter() also reaches paragraphs of tables nested in the cell, which cell.text skips.
                cells.append(" ".join(Paragraph(p, cell).text for p in cell._tc.iter(_P)))
            previous = cell._tc
        rows.append(cells)
    return rows


def _headers_and_footers(document) -> dict:
    found: dict[str, list[str]] = {"headers": [], "footers": []}
    for section in document.sections:
        for key, part in (("headers", section.header), ("footers", section.footer)):
            if part.is_linked_to_previous:
                continue
            for paragraph in part.paragraphs:
                text = paragraph.text.strip()
                if text and text not in found[key]:
                    found[key].append(text)
    return {key: texts for key, texts in found.items() if texts}
