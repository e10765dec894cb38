"""PDF parser: pymupdf text with headings from the outline or font sizes, ruled tables, OCR for scanned pages."""

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path

import pymupdf
from celery.exceptions import SoftTimeLimitExceeded

from .base import Block, ParsedDocument, ParseError, Section, TransientParseError
from .docx import table_blocks
from .ocr import check_ocr_budget, join_lines, ocr_image

OCR_DPI = 300
# A page with images and fewer printable characters than this is a scan: a stamped page number or a
# few stray glyphs in a scanned page's text layer must not stop it being OCR'd.
SCANNED_PAGE_MAX_CHARS = 20
# An image can hold legible text only if it has the pixels for a glyph (tesseract needs letters ~10 px
# tall) and is shown at least as big as one line of small print (8 pt is 33 px at OCR_DPI). A page whose
# images are all smaller (icons, bullets, tracking pixels) is not OCR'd: at 1.5 s a page, a PDF of
# 3,000 such pages once held a worker for 30 minutes to find nothing.
TEXT_IMAGE_MIN_PIXELS = 16
TEXT_IMAGE_MIN_POINTS = 8.0
# A line this much bigger than the body text is a heading candidate (11.5 pt over 10 pt body passes).
HEADING_SIZE_RATIO = 1.15
HEADING_MAX_CHARS = 150
BOLD_HEADING_MAX_CHARS = 80
# When more lines than this look like headings, font sizes are not structure (slides, posters, forms).
HEADING_MAX_LINE_SHARE = 0.3
# find_tables costs 40-250 ms a page, 10-50x the text extraction, and its default "lines" strategy only
# finds ruled tables: pages with fewer horizontal/vertical rules (or cell boxes) than this skip it.
TABLE_MIN_RULES = (3, 2)
TABLE_MIN_CELL_BOXES = 4  # some generators draw every cell as its own rectangle
# Running heads and page numbers are a page's first or last block, in its outer quarter, and repeat
# on many pages (LaTeX puts them 15% down the page, so a narrow margin band misses them).
MARGIN_SHARE = 0.25
RUNNING_HEAD_MIN_PAGE_SHARE = 0.4

_TEXT_FLAGS = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP  # expands ligatures, skips images
_BOLD_FONT = re.compile("Bold|Black|Heavy|Semibold|bold")  # fonts that do not set the bold flag
_BULLET_GLYPHS = "•●▪◦‣○■□➢►"
_BULLET_MARKS = "-–*"  # bullets only when a space follows: "-5%" and "-based" are not list items
_SENTENCE_END = ".,;:"
# Ligature glyphs some fonts map to U+FB00-FB06, control characters and U+FFFD from unmapped glyphs.
_CLEAN = {
    **{code: unicodedata.normalize("NFKC", chr(code)) for code in range(0xFB00, 0xFB07)},
    **{code: " " if chr(code) in "\t\n\r" else None for code in range(0x20)},
    0xFFFD: None,
}

pymupdf.no_recommend_layout()  # otherwise find_tables prints an advert for pymupdf_layout to stdout


@dataclass
class _Line:
    text: str
    size: float
    bold: bool
    upright: bool = True  # rotated text (margin stamps like arXiv ids) is never a heading


@dataclass
class _Item:
    """A text block in reading order, or a finished block (table, OCR paragraph)."""

    page: int
    lines: list[_Line] = field(default_factory=list)
    block: Block | None = None
    bbox: tuple[float, float, float, float] = (0, 0, 0, 0)
    margin: str = ""  # "top" | "bottom" | ""


@dataclass
class _Heading:
    level: int
    text: str
    size: float | None = None  # font-size headings: ranked into levels once all sizes are known


def parse(path: Path, *, filename: str) -> ParsedDocument:
    """Parse a PDF into heading sections of page-numbered blocks, OCR-ing pages that are scans."""
    document = _open(path)
    try:
        with document:
            return _parse(document, filename)
    except (ParseError, TransientParseError, SoftTimeLimitExceeded):
        raise  # a stage over its time limit must say so, not blame the file
    except Exception as exc:  # MuPDF raises RuntimeError subclasses for broken objects deep inside
        raise ParseError(f"The PDF is damaged or truncated: {_short(exc)}") from exc


def _open(path: Path) -> pymupdf.Document:
    try:
        document = pymupdf.open(path, filetype="pdf")
    except pymupdf.EmptyFileError as exc:
        raise ParseError("The PDF is empty.") from exc
    except Exception as exc:
        raise ParseError("The PDF is damaged or truncated: it could not be opened.") from exc
    if document.needs_pass:
        document.close()
        raise ParseError("The PDF is password-protected.")
    if document.page_count == 0:
        document.close()
        raise ParseError("The PDF is damaged or truncated: no pages could be read.")
    return document


def _parse(document: pymupdf.Document, filename: str) -> ParsedDocument:
    warnings: list[str] = []
    if document.is_repaired:
        warnings.append("The PDF was damaged and has been repaired; some content may be missing.")
    page_items: dict[int, list[_Item]] = {}
    ocr_pages: list[int] = []
    tiny_image_pages = 0
    table_count = 0
    for index in range(document.page_count):
        number = index + 1
        try:
            page = document[index]
            items, scanned = _page_text(page, number)
            if scanned and not _images_can_hold_text(page):
                scanned, tiny_image_pages = False, tiny_image_pages + 1
            if scanned:
                ocr_pages.append(number)
            else:
                table_count += _page_tables(page, number, items)
        except RuntimeError as exc:  # MuPDF's errors; one broken page should not lose the others
            warnings.append(f"Page {number} could not be read: {_short(exc)}")
            continue
        page_items[number] = items
    # Counted before any page is OCR'd, so an over-budget PDF fails at once with the true reason.
    check_ocr_budget(len(ocr_pages), "PDF")
    for number in ocr_pages:
        try:
            page_items[number] = _ocr_page(document[number - 1], number)
        except RuntimeError as exc:
            warnings.append(f"Page {number} could not be read: {_short(exc)}")
            page_items[number] = []
            continue
        if not page_items[number]:
            warnings.append(f"No text could be recognised on scanned page {number}.")
    if tiny_image_pages:
        warnings.append(f"{tiny_image_pages} page(s) with little text and only images too small to hold text "
                        "were not OCR'd.")
    items = [item for number in sorted(page_items) for item in page_items[number]]
    items = _drop_running_heads(items, document.page_count - len(ocr_pages))

    headings_from, headings = _headings(document, items)
    title = ((document.metadata or {}).get("title") or "").strip() or Path(filename).stem
    sections = _sections(items, headings, title)
    if not sections:
        if document.is_repaired:
            raise ParseError("The PDF is damaged or truncated: no text could be recovered.")
        if tiny_image_pages:
            raise ParseError(f"No text could be found in the PDF: its {tiny_image_pages} page(s) with images "
                             "carry only images too small to hold text.")
        raise ParseError("No text could be found in the PDF.")

    info = document.metadata or {}
    metadata: dict = {key: info[key].strip() for key in ("title", "author") if (info.get(key) or "").strip()}
    metadata.update(headings_from=headings_from, ocr_pages=ocr_pages, tables=table_count, warnings=warnings)
    detected = "pdf-ocr" if len(ocr_pages) * 2 > document.page_count else "pdf"
    return ParsedDocument(detected_type=detected, sections=sections, page_count=document.page_count, metadata=metadata)


def _page_text(page: pymupdf.Page, number: int) -> tuple[list[_Item], bool]:
    """Text blocks of a page, and whether the page is a scan to OCR instead."""
    height = page.rect.height or 1
    items, printable = [], 0
    for raw in page.get_text("dict", flags=_TEXT_FLAGS)["blocks"]:
        lines = []
        for raw_line in raw.get("lines", ()):
            spans = [s for s in raw_line["spans"] if s["text"].strip()]
            if not spans:
                continue
            text = "".join(s["text"] for s in raw_line["spans"]).translate(_CLEAN).strip()
            if not text:
                continue
            printable += len("".join(text.split()))
            main = max(spans, key=lambda s: len(s["text"].strip()))
            bold = all(s["flags"] & pymupdf.TEXT_FONT_BOLD or _BOLD_FONT.search(s["font"]) for s in spans)
            upright = abs(raw_line["dir"][1]) < 0.01
            lines.append(_Line(text=text, size=round(main["size"] * 2) / 2, bold=bold, upright=upright))
        if lines:
            items.append(_Item(page=number, lines=lines, bbox=tuple(raw["bbox"])))
    if items:
        top, bottom = min(items, key=lambda item: item.bbox[1]), max(items, key=lambda item: item.bbox[3])
        if top.bbox[3] < height * MARGIN_SHARE:
            top.margin = "top"
        if bottom.bbox[1] > height * (1 - MARGIN_SHARE):
            bottom.margin = "bottom"
    scanned = printable < SCANNED_PAGE_MAX_CHARS and bool(page.get_images())
    return items, scanned


def _images_can_hold_text(page: pymupdf.Page) -> bool:
    for image in page.get_image_info():
        x0, y0, x1, y1 = image["bbox"]
        if (min(image["width"], image["height"]) >= TEXT_IMAGE_MIN_PIXELS
                and min(x1 - x0, y1 - y0) >= TEXT_IMAGE_MIN_POINTS):
            return True
    return False


def _ocr_page(page: pymupdf.Page, number: int) -> list[_Item]:
    pixmap = page.get_pixmap(dpi=OCR_DPI, colorspace=pymupdf.csGRAY, alpha=False)
    # PNM is 10x faster to encode than PNG and tesseract reads it from stdin just the same.
    result = ocr_image(pixmap.tobytes("pnm"), dpi=OCR_DPI)
    return [_Item(page=number, block=Block(text, page=number, metadata={"ocr": True})) for text in result.paragraphs]


def _page_tables(page: pymupdf.Page, number: int, items: list[_Item]) -> int:
    """Replace the text blocks inside ruled tables with table blocks; returns the number of tables."""
    if not _has_rules(page):
        return 0
    found = 0
    for table in page.find_tables().tables:
        rows = [[(cell or "").translate(_CLEAN) for cell in row] for row in table.extract()]
        if not _is_data_table(rows):
            continue
        # Text blocks centred inside the table are its cells, already in the rows.
        area = pymupdf.Rect(table.bbox) + (-1, -1, 1, 1)
        inside = [i for i, item in enumerate(items) if area.contains(_middle(item.bbox))]
        position = inside[0] if inside else len(items)
        for i in reversed(inside):
            del items[i]
        blocks = table_blocks(rows, page=number)
        items[position:position] = [_Item(page=number, block=block, bbox=tuple(table.bbox)) for block in blocks]
        found += 1
    return found


def _middle(bbox: tuple) -> pymupdf.Point:
    return pymupdf.Point((bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2)


def _has_rules(page: pymupdf.Page) -> bool:
    horizontal = vertical = boxes = 0
    for drawing in page.get_drawings():
        for item in drawing["items"]:
            if item[0] == "l":
                start, end = item[1], item[2]
                horizontal += abs(start.y - end.y) < 1
                vertical += abs(start.x - end.x) < 1
            elif item[0] == "re":
                rect = item[1]
                # Thin filled rectangles are rules; larger ones are frames (code boxes, notes) or cells.
                if rect.height < 3 and rect.width > 5:
                    horizontal += 1
                elif rect.width < 3 and rect.height > 5:
                    vertical += 1
                elif rect.width > 5 and rect.height > 5:
                    boxes += 1
    return (horizontal >= TABLE_MIN_RULES[0] and vertical >= TABLE_MIN_RULES[1]) or boxes >= TABLE_MIN_CELL_BOXES


def _is_data_table(rows: list[list[str]]) -> bool:
    # Ruled boxes around page layout (two columns of prose, a framed note) are not data tables.
    cells = [cell for row in rows for cell in row]
    filled = [cell for cell in cells if cell.strip()]
    if len(rows) < 2 or max(len(row) for row in rows) < 2 or len(filled) * 2 < len(cells):
        return False
    lengths = sorted(len(cell) for cell in filled)
    return lengths[len(lengths) // 2] <= 100


def _drop_running_heads(items: list[_Item], text_pages: int) -> list[_Item]:
    if text_pages < 3:
        return items
    # Font size is part of the key so that a title page's big title survives the same text as running head.
    def key(item: _Item) -> tuple:
        return item.margin, item.lines[0].size, re.sub(r"\d+", "#", " ".join(line.text for line in item.lines))

    pages_per_key: dict[tuple, set[int]] = {}
    for item in items:
        if item.margin and item.lines:
            pages_per_key.setdefault(key(item), set()).add(item.page)
    threshold = max(3, text_pages * RUNNING_HEAD_MIN_PAGE_SHARE)
    running = {k for k, pages in pages_per_key.items() if len(pages) >= threshold}
    return [item for item in items if not (item.margin and item.lines and key(item) in running)]


def _headings(document: pymupdf.Document, items: list[_Item]) -> tuple[str | None, dict[int, list]]:
    """Split text items into headings and body: {item index: [_Heading | _Line, ...]}; outline first."""
    split = _outline_headings(document.get_toc(simple=True), items)
    if sum(isinstance(part, _Heading) for parts in split.values() for part in parts) >= 2:
        return "outline", split
    split = _font_headings(items)  # holds only items with a heading
    return ("fonts", split) if split else (None, {})


def _outline_headings(toc: list, items: list[_Item]) -> dict[int, list]:
    # Outline entries are matched against the lines they name, since their target positions are often
    # stale (pages extracted from a bigger book keep the whole book's outline).
    entries: dict[str, list[tuple[int, int]]] = {}
    for level, title, page in toc:
        if len(_key(title)) >= 2:
            entries.setdefault(_key(title), []).append((level, page))
    split: dict[int, list] = {}
    if not entries:
        return split
    for index, item in enumerate(items):
        parts, i, found = [], 0, False
        while i < len(item.lines):
            for j in range(min(len(item.lines), i + 4), i, -1):
                candidates = entries.get(_key(" ".join(line.text for line in item.lines[i:j])), [])
                match = next((c for c in candidates if c[1] < 1 or abs(c[1] - item.page) <= 1), None)
                if match:
                    candidates.remove(match)
                    parts.append(_Heading(match[0], join_lines(line.text for line in item.lines[i:j])))
                    i, found = j, True
                    break
            else:
                parts.append(item.lines[i])
                i += 1
        if found:
            split[index] = parts
    return split


def _font_headings(items: list[_Item]) -> dict[int, list]:
    sizes = Counter()
    for item in items:
        for line in item.lines:
            sizes[line.size] += len(line.text)
    if not sizes:
        return {}
    body = sizes.most_common(1)[0][0]
    split: dict[int, list] = {}
    headings: list[_Heading] = []
    heading_lines = total_lines = 0

    def run_key(line: _Line) -> tuple:
        # Within big text, bold changes (a monospace word in a title) do not split the heading.
        return line.size, line.upright, line.bold and line.size < body * HEADING_SIZE_RATIO

    for index, item in enumerate(items):
        total_lines += len(item.lines)
        parts: list = []
        found = False
        for _, group in groupby(item.lines, key=run_key):
            run = list(group)
            heading = _heading_candidate(run, body)
            if heading:
                parts.append(heading)
                headings.append(heading)
                heading_lines += len(run)
                found = True
            else:
                parts.extend(run)
        if found:
            split[index] = parts
    if heading_lines > total_lines * HEADING_MAX_LINE_SHARE:
        return {}
    # Bigger text is a higher level; bold body-size headings sit below every sized heading.
    ranks = {size: rank for rank, size in enumerate(sorted({h.size for h in headings if h.size}, reverse=True), 1)}
    for heading in headings:
        heading.level = min(ranks[heading.size] if heading.size else len(ranks) + 1, 6)
    return split


def _heading_candidate(run: list[_Line], body: float) -> _Heading | None:
    bigger = run[0].size >= body * HEADING_SIZE_RATIO
    if not run[0].upright:
        return None
    if not bigger and not (run[0].bold and run[0].size >= body):
        return None
    text = join_lines(line.text for line in run)
    limit = HEADING_MAX_CHARS if bigger else BOLD_HEADING_MAX_CHARS
    if len(text) > limit or len(run) > (3 if bigger else 2) or len(_key(text)) < 2:
        return None
    if text[-1] in _SENTENCE_END or not any(c.isalpha() for c in text):
        return None
    return _Heading(level=0, text=text, size=run[0].size if bigger else None)


def _sections(items: list[_Item], split: dict[int, list], title: str) -> list[Section]:
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    current: Section | None = None

    def start(section: Section) -> Section:
        sections.append(section)
        return section

    for index, item in enumerate(items):
        if not split and (current is None or current.page != item.page):
            # No heading structure at all: a section per page keeps parent chunks page-sized.
            current = start(Section(title=f"Page {item.page}", section_path=[], page=item.page))
        parts = [item.block] if item.block is not None else split.get(index) or item.lines
        for is_text, group in groupby(parts, key=lambda part: isinstance(part, _Line)):
            for part in [_text_block(list(group), item.page)] if is_text else group:
                if isinstance(part, _Heading):
                    while stack and stack[-1][0] >= part.level:
                        stack.pop()
                    stack.append((part.level, part.text))
                    current = start(Section(part.text, [text for _, text in stack], page=item.page))
                else:
                    current = current or start(Section(title=title, section_path=[], page=item.page))
                    current.blocks.append(part)
    return [section for section in sections if section.blocks]


def _text_block(lines: list[_Line], page: int) -> Block:
    # A bullet glyph starts a new list item; other line breaks are soft wraps.
    items: list[list[str]] = []
    for line in lines:
        if not items or _is_bullet(line.text):
            items.append([])
        items[-1].append(line.text)
    text = "\n".join(join_lines(item) for item in items)
    return Block(text, kind="list" if _is_bullet(lines[0].text) else "paragraph", page=page)


def _is_bullet(text: str) -> bool:
    # Some PDFs put the bullet glyph on a line of its own, before the item's text.
    return text[0] in _BULLET_GLYPHS or (len(text) > 1 and text[0] in _BULLET_MARKS and text[1] == " ")


def _key(text: str) -> str:
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).casefold())


def _short(exc: Exception) -> str:
    return (str(exc).strip() or type(exc).__name__)[:200]
