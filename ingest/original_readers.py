"""An original as the console's viewers show it: a sheet's rows, a deck's slides, a transcript's cues,
an email's headers, body and attachments.

Read with the parsers' own code (cell formatting, cue parsing, MIME walking, attachment names), so
what a viewer shows lines up with the chunks a search cites. Everything returned is plain text:
an email's HTML body comes back as the text the parser extracted, never as markup.
"""

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import openpyxl
import pptx
import xlrd

from ingest.originals import local_original
from ingest.parsing import email as email_parser
from ingest.parsing import office
from ingest.parsing import pptx as pptx_parser
from ingest.parsing import xlsx as xlsx_parser
from ingest.parsing.base import ParseError, TransientParseError
from ingest.parsing.charset import decode_bytes
from ingest.parsing.detect import OLE_MAGIC
from ingest.parsing.vtt import Cue, read_cues

SHEET_TYPES = ("xlsx", "xls")
SLIDE_TYPES = ("pptx",)
CUE_TYPES = ("vtt",)
EMAIL_TYPES = ("eml", "msg")


class UnreadableOriginal(Exception):
    """The original cannot be shown (missing, damaged, or a storage that did not answer): a reason to show."""


@contextmanager
def _opened(field_file) -> Iterator[Path]:
    try:
        with local_original(field_file) as path:
            yield path
    except (ParseError, TransientParseError) as exc:
        raise UnreadableOriginal(str(exc)) from exc


@dataclass
class Sheet:
    names: list[str]
    name: str
    rows: list[tuple[int, list[str]]]  # (row number in the sheet, cell texts as the parser writes them)


def read_sheet(field_file, detected_type: str, sheet: str = "") -> Sheet:
    """One sheet of a workbook (the named one, else the first), its non-empty rows with their numbers."""
    with _opened(field_file) as path:
        try:
            if detected_type == "xls" and not _is_zip(path):
                return _xls_sheet(path, sheet)
            return _xlsx_sheet(path, sheet)
        except UnreadableOriginal:
            raise
        except Exception as exc:  # openpyxl and xlrd raise many types on damaged files
            raise UnreadableOriginal(f"The spreadsheet could not be read ({type(exc).__name__}).") from exc


def _is_zip(path: Path) -> bool:
    with open(path, "rb") as file:
        return file.read(4) == b"PK\x03\x04"


def _rows(values) -> list[tuple[int, list[str]]]:
    numbered = ((n, xlsx_parser._trim([xlsx_parser._text(v) for v in row])) for n, row in enumerate(values, start=1))
    return [(n, cells) for n, cells in numbered if cells]


def _xlsx_sheet(path: Path, wanted: str) -> Sheet:
    workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        names = workbook.sheetnames
        name = wanted if wanted in names else names[0]
        worksheet = workbook[name]
        worksheet.reset_dimensions()  # as the parser does: stored dimensions often cut rows off
        return Sheet(names, name, _rows(worksheet.iter_rows(values_only=True)))
    finally:
        workbook.close()


def _xls_sheet(path: Path, wanted: str) -> Sheet:
    book = xlrd.open_workbook(str(path), on_demand=True)
    try:
        names = book.sheet_names()
        name = wanted if wanted in names else names[0]
        sheet = book.sheet_by_name(name)
        values = ([xlsx_parser._xls_value(cell, book.datemode) for cell in sheet.row(r)] for r in range(sheet.nrows))
        return Sheet(names, name, _rows(values))
    finally:
        book.release_resources()


@dataclass
class Slide:
    number: int
    title: str
    texts: list[str] = field(default_factory=list)
    notes: str = ""


def read_slides(field_file) -> list[Slide]:
    """Every slide of a .pptx in order, with its text frames and tables (as the parser reads them) and notes."""
    with _opened(field_file) as path:
        try:
            deck = pptx.Presentation(str(path))
            slides = []
            for number, slide in enumerate(deck.slides, start=1):
                section = pptx_parser._slide_section(slide, number)
                texts = [b.text for b in section.blocks if b.kind != "notes"]
                notes = "\n\n".join(b.text for b in section.blocks if b.kind == "notes")
                if texts == [section.title]:  # a title-only slide: its title is its only text
                    texts = []
                slides.append(Slide(number, section.title, texts, notes))
            return slides
        except Exception as exc:
            raise UnreadableOriginal(f"The presentation could not be read ({type(exc).__name__}).") from exc


def slides_as_pdf(field_file, filename: str, cached: Path) -> Path:
    """The deck rendered to PDF by LibreOffice (one page per shown slide), made once into `cached`.

    The conversion takes seconds (a cold LibreOffice profile each time), so it runs on the first
    request only; the file is written beside its final name and renamed into place, so two
    requests rendering at once both end with a whole file.
    """
    if cached.is_file():
        return cached
    with _opened(field_file) as path:
        try:
            with office.converted(path, "pdf", filename=filename) as pdf:
                cached.parent.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile(dir=cached.parent, suffix=".part", delete=False) as part:
                    with open(pdf, "rb") as source:
                        shutil.copyfileobj(source, part)
                os.replace(part.name, cached)
        except (ParseError, TransientParseError) as exc:
            raise UnreadableOriginal(f"The slides could not be rendered: {exc}") from exc
    return cached


def read_cues_of(field_file) -> list[Cue]:
    """A WebVTT file's cues (start, end, text, speaker), in order."""
    with _opened(field_file) as path:
        return read_cues(decode_bytes(path.read_bytes()).text.lstrip("\ufeff"))


@dataclass
class Email:
    fields: dict  # from, to, cc, date, subject
    body: list[str]  # paragraphs of text
    attachments: list[tuple[str, bytes]]  # names exactly as the parser names them in section paths
    warnings: list[str] = field(default_factory=list)


def read_email(field_file) -> Email:
    """An .eml or Outlook .msg: headers, body text, and the attachments with their bytes."""
    with _opened(field_file) as path:
        with open(path, "rb") as file:
            is_msg = file.read(8) == OLE_MAGIC
        try:
            if is_msg:
                fields, blocks, attachments, warnings = email_parser._read_msg(path)
            else:
                (fields, blocks, attachments), warnings = email_parser._read_eml(path), []
        except ParseError as exc:
            raise UnreadableOriginal(str(exc)) from exc
        return Email(fields, [b.text for b in blocks], attachments, warnings)
