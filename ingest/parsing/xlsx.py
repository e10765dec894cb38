"""Spreadsheet parser: .xlsx with openpyxl, .xls with xlrd; a section per sheet, rows as "Header: value"."""

import datetime
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
            sections.append(_sheet_section(sheet.title, sheet.iter_rows(values_only=True)))
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
            sections.append(_sheet_section(sheet.name, rows))
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


def _sheet_section(name: str, rows: Iterable[Iterable]) -> Section:
    section = Section(title=name, section_path=[name], sheet=name)
    numbered = ((number, _trim([_text(value) for value in row])) for number, row in enumerate(rows, start=1))
    numbered = ((number, cells) for number, cells in numbered if cells)
    head = list(islice(numbered, HEADER_SCAN_ROWS))
    if not head:
        return section
    widest = max(_filled(cells) for _, cells in head)
    if widest < 2:
        # A single column of notes has no header to repeat: plain lines.
        lines = ((number, " ".join(cell for cell in cells if cell)) for number, cells in chain(head, numbered))
        section.blocks.extend(_row_blocks(lines, header=""))
        return section
    at = next(i for i, (_, cells) in enumerate(head) if _filled(cells) >= max(2, widest / 2))
    if at:
        caption = "\n".join(" ".join(cell for cell in cells if cell) for _, cells in head[:at])
        section.blocks.append(Block(caption, metadata={"rows": [head[0][0], head[at - 1][0]]}))
    names = [cell or f"Column {get_column_letter(i)}" for i, cell in enumerate(head[at][1], start=1)]
    header = " | ".join(names)
    lines = (
        (number, " | ".join(f"{_column_name(names, i)}: {cell}" for i, cell in enumerate(cells) if cell))
        for number, cells in chain(head[at + 1 :], numbered)
    )
    section.blocks.extend(_row_blocks(lines, header=header) or [Block(header, kind="table")])
    return section


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
