"""Spreadsheet parser: .xlsx with openpyxl, .xls with xlrd; a section per sheet, rows as "Header: value"."""

import datetime
import re
from collections.abc import Iterable
from itertools import chain, islice
from pathlib import Path

import openpyxl
import xlrd
from openpyxl.utils import get_column_letter

from . import office
from .base import Block, ParsedDocument, ParseError, Section, TransientParseError

# Data rows per block: each block repeats the header line, so it stands alone as a child chunk.
ROWS_PER_BLOCK = 20
# The header is the first row holding at least half as many cells as the widest of the first rows;
# title rows above it ("Revenue 2023", "In millions of CHF") become the sheet's caption.
HEADER_SCAN_ROWS = 10
_NUMBER = re.compile(r"^\s*[-+(]?[$€£¥₹]?\s?\d[\d,. ]*%?\)?\s*$|^\s*[—–-]\s*$")


def parse(path: Path, *, filename: str) -> ParsedDocument:
    """Parse an .xlsx workbook (openpyxl read-only, cached formula values)."""
    office.reject_encrypted(path, "spreadsheet")
    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # InvalidFileException, BadZipFile, KeyError, lxml errors…
        raise ParseError("The spreadsheet is damaged or not an .xlsx file.") from exc
    try:
        sections = []
        for sheet in workbook.worksheets:
            sheet.reset_dimensions()  # stored dimensions are often wrong and would cut rows off
            sections.extend(_sheet_sections(sheet.title, sheet.iter_rows(values_only=True)))
        return _document("xlsx", sections, workbook.sheetnames)
    except (ParseError, TransientParseError):
        raise
    except Exception as exc:
        raise ParseError(f"The spreadsheet could not be read ({type(exc).__name__}).") from exc
    finally:
        workbook.close()


def parse_xls(path: Path, *, filename: str) -> ParsedDocument:
    """Parse a legacy .xls with xlrd (≈10x faster than a LibreOffice round trip, which is the fallback)."""
    if office.is_ooxml(path):
        return parse(path, filename=filename)
    try:
        book = xlrd.open_workbook(str(path), on_demand=True)
    except xlrd.XLRDError as exc:
        if "encrypted" in str(exc).lower():
            raise ParseError("The spreadsheet is password-protected.") from exc
        if office.is_ole(path):  # a workbook variant xlrd does not know; LibreOffice reads more of them
            return _parse_xls_with_libreoffice(path, filename)
        raise ParseError("The spreadsheet is damaged or not an .xls file.") from exc
    except Exception as exc:
        raise ParseError("The spreadsheet is damaged or not an .xls file.") from exc
    try:
        sections = []
        for index in range(book.nsheets):
            sheet = book.sheet_by_index(index)
            rows = ([_xls_value(cell, book.datemode) for cell in sheet.row(r)] for r in range(sheet.nrows))
            sections.extend(_sheet_sections(sheet.name, rows))
            book.unload_sheet(index)
        return _document("xls", sections, book.sheet_names())
    except (ParseError, TransientParseError):
        raise
    except Exception as exc:
        raise ParseError(f"The spreadsheet could not be read ({type(exc).__name__}).") from exc
    finally:
        book.release_resources()


def _parse_xls_with_libreoffice(path: Path, filename: str) -> ParsedDocument:
    with office.converted(path, "xlsx", filename=filename) as converted:
        parsed = parse(converted, filename=filename)
    parsed.detected_type = "xls"
    return parsed


def _document(detected_type: str, sections: list[Section], sheet_names: list[str]) -> ParsedDocument:
    sections = [section for section in sections if section.blocks]
    if not sections:
        raise ParseError("The spreadsheet contains no data.")
    return ParsedDocument(detected_type=detected_type, sections=sections, metadata={"sheets": sheet_names})


def _sheet_sections(name: str, rows: Iterable[Iterable]) -> list[Section]:
    """A section per table block of the sheet, each with its own caption and header.

    A sheet often holds several tables one under the other ("January–June 2023", then the same
    columns for 2022): a header-like row (text only, as wide as a header) after data rows starts a
    new block, the text rows just above it are its caption, and a row repeating the header is skipped.
    """
    section = Section(title=name, section_path=[name], sheet=name)
    numbered = ((number, _trim([_text(value) for value in row])) for number, row in enumerate(rows, start=1))
    numbered = ((number, cells) for number, cells in numbered if cells)
    head = list(islice(numbered, HEADER_SCAN_ROWS))
    if not head:
        return [section]
    widest = max(_filled(cells) for _, cells in head)
    if widest < 2:
        # A single column of notes has no header to repeat: plain lines.
        lines = ((number, " ".join(cell for cell in cells if cell)) for number, cells in chain(head, numbered))
        section.blocks.extend(_row_blocks(lines, header=""))
        return [section]
    at = next(i for i, (_, cells) in enumerate(head) if _filled(cells) >= max(2, widest / 2))
    caption = [line for _, cells in head[:at] if (line := " ".join(cell for cell in cells if cell))]
    sections: list[Section] = []
    header_cells, body, pending = head[at][1], [], []

    def close(caption: list[str], header_cells: list[str], body: list[tuple[int, list[str]]]) -> None:
        label = caption[-1] if caption else ""
        block_section = Section(title=name, section_path=[name, label] if sections and label else [name],
                                sheet=name)
        if caption and not sections:
            block_section.blocks.append(Block("\n".join(caption), metadata={"rows": [head[0][0], head[at][0] - 1]}))
        elif caption:
            block_section.blocks.append(Block("\n".join(caption)))
        names = [cell or f"Column {get_column_letter(i)}" for i, cell in enumerate(header_cells, start=1)]
        header = " | ".join(names)
        lines = ((number, " | ".join(f"{_column_name(names, i)}: {cell}" for i, cell in enumerate(cells) if cell))
                 for number, cells in body)
        block_section.blocks.extend(_row_blocks(lines, header=header) or [Block(header, kind="table")])
        sections.append(block_section)

    threshold = max(2, _filled(header_cells) / 2)
    previous = head[at][0]
    gap = False  # a blank row since the last data row: what separates two tables in a sheet
    for number, cells in chain(head[at + 1 :], numbered):
        gap = gap or number > previous + 1
        previous = number
        text_only = not any(_NUMBER.match(cell) for cell in cells if cell)
        if text_only and body and gap and _filled(cells) >= threshold:
            close(caption, header_cells, body)
            caption = [" ".join(c for c in cells_ if c) for _, cells_ in pending]
            header_cells, body, pending, gap = cells, [], [], False
            threshold = max(2, _filled(header_cells) / 2)
            continue
        if cells == header_cells and any(row != header_cells for _, row in body):
            continue  # the header repeated among data rows (a printed page break)
        if text_only and body and gap and _filled(cells) < threshold:
            pending.append((number, cells))  # a caption of the next block, or a note under this one
            continue
        body.extend(pending)
        pending, gap = [], False
        body.append((number, cells))
    close(caption, header_cells, body)
    if pending:  # footnotes under the last table
        notes = ((number, " ".join(cell for cell in cells if cell)) for number, cells in pending)
        sections[-1].blocks.extend(_row_blocks(notes, header=""))
    return sections


def _row_blocks(lines: Iterable[tuple[int, str]], *, header: str) -> list[Block]:
    """Blocks of up to ROWS_PER_BLOCK rows, each led by the header line when there is one."""
    blocks: list[Block] = []
    group: list[tuple[int, str]] = []
    for number, line in chain(lines, [(0, None)]):
        if line is not None:
            group.append((number, line))
        if group and (line is None or len(group) == ROWS_PER_BLOCK):
            text = "\n".join([header, *(row for _, row in group)] if header else [row for _, row in group])
            rows = [group[0][0], group[-1][0]]
            blocks.append(Block(text, kind="table" if header else "paragraph", metadata={"rows": rows}))
            group = []
    return blocks


def _filled(cells: list[str]) -> int:
    return sum(1 for cell in cells if cell)


def _column_name(names: list[str], index: int) -> str:
    return names[index] if index < len(names) else f"Column {get_column_letter(index + 1)}"


def _trim(cells: list[str]) -> list[str]:
    while cells and not cells[-1]:
        cells.pop()
    return cells


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        # Excel keeps 15 significant digits; more would print binary noise (0.30000000000000004).
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.15g}"
    if isinstance(value, datetime.datetime):
        return value.date().isoformat() if value.time() == datetime.time() else value.isoformat(sep=" ")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return " ".join(str(value).split())


def _xls_value(cell: xlrd.sheet.Cell, datemode: int):
    if cell.ctype == xlrd.XL_CELL_DATE:
        try:
            return xlrd.xldate_as_datetime(cell.value, datemode)
        except (ValueError, OverflowError, xlrd.xldate.XLDateError):
            return cell.value
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return bool(cell.value)
    if cell.ctype in (xlrd.XL_CELL_ERROR, xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return None
    return cell.value
