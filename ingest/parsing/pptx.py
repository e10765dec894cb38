"""Presentation parser: .pptx with python-pptx (a section per slide: text, tables, notes); .ppt via LibreOffice."""

from pathlib import Path

import pptx
from pptx.enum.shapes import PP_PLACEHOLDER
from pptx.shapes.group import GroupShape

from . import office
from .base import Block, ParsedDocument, ParseError, Section, TransientParseError
from .docx import table_blocks

_TITLE_TYPES = (PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE, PP_PLACEHOLDER.VERTICAL_TITLE)


def parse(path: Path, *, filename: str) -> ParsedDocument:
    """Parse a .pptx: one section per slide with its text frames, tables and speaker notes."""
    office.reject_encrypted(path, "presentation")
    try:
        presentation = pptx.Presentation(str(path))
    except Exception as exc:  # PackageNotFoundError, BadZipFile, KeyError, lxml errors…
        raise ParseError("The presentation is damaged or not a .pptx file.") from exc
    try:
        sections = [_slide_section(slide, number) for number, slide in enumerate(presentation.slides, start=1)]
        title = presentation.core_properties.title or Path(filename).stem
    except (ParseError, TransientParseError):
        raise
    except Exception as exc:
        raise ParseError(f"The presentation could not be read ({type(exc).__name__}).") from exc
    slide_count = len(sections)
    sections = [section for section in sections if section.blocks]
    if not sections:
        raise ParseError("The presentation contains no text.")
    return ParsedDocument(detected_type="pptx", sections=sections, page_count=slide_count, metadata={"title": title})


def parse_ppt(path: Path, *, filename: str) -> ParsedDocument:
    """Parse a legacy .ppt by converting it to .pptx with LibreOffice (OOXML misnamed .ppt is read directly)."""
    return office.parse_legacy(path, filename=filename, legacy="ppt", kind="presentation", parse=parse)


def _slide_section(slide, number: int) -> Section:
    title_shape = _title_shape(slide)
    title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
    section = Section(title=title or f"Slide {number}", section_path=[title or f"Slide {number}"], slide=number)
    skip = title_shape.shape_id if title_shape is not None and title else None
    section.blocks.extend(_shape_blocks(slide.shapes, skip))
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = frame.text.strip() if frame is not None else ""
        if notes:
            section.blocks.append(Block(notes, kind="notes"))
    if title and not section.blocks:
        # A title-only slide (a divider) would otherwise carry no text at all.
        section.blocks.append(Block(title, kind="header"))
    return section


def _title_shape(slide):
    # Not slide.shapes.title: that also takes any placeholder with idx 0, and LibreOffice writes body
    # placeholders as a bare <p:ph/> (idx 0, type obj).
    for shape in slide.placeholders:
        if shape.placeholder_format.type in _TITLE_TYPES and shape.has_text_frame:
            return shape
    return None


def _shape_blocks(shapes, skip_id: int | None) -> list[Block]:
    blocks = []
    # Reading order: top to bottom, then left to right; shapes without a position keep their z-order.
    ordered = sorted(shapes, key=lambda shape: (shape.top or 0, shape.left or 0))
    for shape in ordered:
        if shape.shape_id == skip_id:
            continue
        if isinstance(shape, GroupShape):
            blocks.extend(_shape_blocks(shape.shapes, skip_id))
        elif shape.has_table:
            rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
            blocks.extend(table_blocks(rows))
        elif shape.has_text_frame:
            text = _frame_text(shape.text_frame)
            if text:
                blocks.append(Block(text))
    return blocks


def _frame_text(frame) -> str:
    lines = []
    for paragraph in frame.paragraphs:
        text = " ".join(paragraph.text.split())
        if text:
            lines.append("  " * paragraph.level + text)
    return "\n".join(lines)
