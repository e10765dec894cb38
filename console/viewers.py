"""The original at the cited place, for the types a browser cannot show by itself.

A sheet as a table with the cited rows highlighted, a deck slide by slide with the cited slide
highlighted, a transcript's cues with the cited cues highlighted, an email with its headers, body
and attachments (the cited one highlighted, each downloadable). Everything is read from the stored
original and rendered as escaped text: nothing of an upload is ever inlined as HTML or run, and the
pages forbid inline script by their Content-Security-Policy.
"""

from io import BytesIO

from django.http import FileResponse, Http404

from openpyxl.utils import get_column_letter

from console.shell import location_label, render_page
from console.slide_previews import preview_path
from console.viewer_citations import cited_attachment, cited_cues, cited_rows, cue_at
from ingest.original_readers import (CUE_TYPES, EMAIL_TYPES, SHEET_TYPES, SLIDE_TYPES, UnreadableOriginal,
                                     read_cues_of, read_email, read_sheet, read_slides, slides_as_pdf)
from memory.models import Chunk

# Rows of a sheet on one page: a window around the cited rows; the rest is a link away.
ROWS_PER_VIEW = 500
# Rows shown above the first cited row, so it is seen in its context rather than at the very top.
ROWS_BEFORE_CITED = 20
# Columns shown; wider sheets say how many more there are.
MAX_COLUMNS = 40
# Only the console's own assets run on these pages; the original's text is escaped, this is the second lock.
VIEWER_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
              "base-uri 'none'; form-action 'self'; frame-ancestors 'self'")


def viewable(detected_type: str) -> bool:
    return detected_type in SHEET_TYPES + SLIDE_TYPES + CUE_TYPES + EMAIL_TYPES


def show_original(request, scope, document, chunk):
    """The viewer of this document's type at `chunk` (or at ?sheet/?row, ?slide, ?t)."""
    kind = document.detected_type
    try:
        if kind in SHEET_TYPES:
            template, context = "documents/viewer_sheet.html", _sheet_context(request, document, chunk)
        elif kind in SLIDE_TYPES and request.GET.get("rendered"):
            template, context = "documents/document_view.html", _rendered_slide_context(request, document, chunk)
        elif kind in SLIDE_TYPES:
            template, context = "documents/viewer_slides.html", _slides_context(request, document, chunk)
        elif kind in CUE_TYPES:
            template, context = "documents/viewer_cues.html", _cues_context(request, document, chunk)
        else:
            template, context = "documents/viewer_email.html", _email_context(document, chunk)
    except UnreadableOriginal as exc:
        template, context = "documents/viewer_unreadable.html", {"reason": str(exc)}
    # The viewer's own place (a row, a cue) is more precise than the chunk's label; the label otherwise.
    where = context.get("where") or (location_label(chunk.location) if chunk else "")
    context.update(section="documents", document=document, chunk=chunk, where=where)
    response = render_page(request, scope, template, context)
    response["Content-Security-Policy"] = VIEWER_CSP
    return response


def _number(request, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() and 0 < int(value) < 2**31 else None


def _sheet_context(request, document, chunk) -> dict:
    wanted = request.GET.get("sheet") or (chunk.sheet if chunk else "")
    sheet = read_sheet(document.original, document.detected_type, wanted)
    cited = set()
    if chunk is not None and chunk.sheet == sheet.name:
        siblings = document.chunks.filter(level=Chunk.Level.CHILD, sheet=sheet.name).order_by("ordinal")
        cited_ids = {chunk.pk} if chunk.level == Chunk.Level.CHILD else set(chunk.children.values_list("pk", flat=True))
        cited = set(cited_rows(sheet.rows, list(siblings.values_list("pk", "text")), cited_ids))
    asked_row = _number(request, "row")
    if asked_row:
        cited = {asked_row}
    numbers = [number for number, _ in sheet.rows]
    first_cited = min(cited) if cited else None
    start = _number(request, "from")
    if start is None:
        start = max(1, first_cited - ROWS_BEFORE_CITED) if first_cited else 1
    window = [(n, cells) for n, cells in sheet.rows if n >= start][:ROWS_PER_VIEW]
    width = min(MAX_COLUMNS, max((len(cells) for _, cells in window), default=0))
    rows = [{"number": n, "cells": (cells + [""] * width)[:width], "cited": n in cited} for n, cells in window]
    last_shown = rows[-1]["number"] if rows else start
    earlier = [n for n in numbers if n < start]
    return {
        "sheet": sheet, "rows": rows, "columns": [get_column_letter(i) for i in range(1, width + 1)],
        "hidden_columns": max(0, max((len(c) for _, c in window), default=0) - width),
        "shown_first": rows[0]["number"] if rows else None, "shown_last": last_shown,
        "cited_count": len(cited), "cited_outside": bool(cited) and not any(r["cited"] for r in rows),
        "first_cited": first_cited, "total_rows": len(sheet.rows),
        "earlier_from": earlier[-ROWS_PER_VIEW] if len(earlier) >= ROWS_PER_VIEW else (earlier[0] if earlier else None),
        "later_from": next((n for n in numbers if n > last_shown), None),
        "where": f"sheet “{sheet.name}”" + (f" · row {first_cited}" if first_cited else ""),
    }


def _slides_context(request, document, chunk) -> dict:
    slides = read_slides(document.original)
    cited = _number(request, "slide") or (chunk.slide if chunk and chunk.slide else None)
    return {"slides": slides, "cited_slide": cited, "where": f"slide {cited}" if cited else ""}


def _rendered_slide_context(request, document, chunk) -> dict:
    """The deck's rendered PDF in the PDF viewer, at the cited slide's page, its passage highlighted."""
    slide = _number(request, "slide") or (chunk.slide if chunk and chunk.slide else 1)
    return {"page_number": slide, "passage": chunk.text if chunk else "", "where": f"slide {slide}",
            "pdf_src": f"/documents/{document.pk}/slides.pdf", "slides_text_url": f"/documents/{document.pk}/view/"
            + (f"?chunk={chunk.pk}" if chunk else f"?slide={slide}")}


def _cues_context(request, document, chunk) -> dict:
    cues = read_cues_of(document.original)
    seconds = request.GET.get("t", "")
    try:
        at = float(seconds) if seconds else None
    except ValueError:
        at = None
    if at is not None and at >= 0:
        cited = cue_at(cues, at)
    elif chunk is not None:
        cited = cited_cues(cues, chunk.start_time, chunk.end_time, chunk.text)
    else:
        cited = []
    chosen = set(cited)
    return {"cues": [{"cue": cue, "index": i, "cited": i in chosen, "clock": location_label({"start_time": cue.start})}
                     for i, cue in enumerate(cues)],
            "cited_count": len(cited), "where": location_label({"start_time": cues[cited[0]].start}) if cited else ""}


def _email_context(document, chunk) -> dict:
    message = read_email(document.original)
    cited_name = cited_attachment(chunk.section_path) if chunk else ""
    attachments = [{"number": n, "name": name, "size": len(data), "cited": name == cited_name}
                   for n, (name, data) in enumerate(message.attachments, start=1)]
    return {"message": message, "attachments": attachments, "cited_attachment": cited_name,
            "body_cited": chunk is not None and not cited_name,
            "headers": [(label, message.fields.get(key, "")) for key, label in
                        (("from", "From"), ("to", "To"), ("cc", "Cc"), ("date", "Date"), ("subject", "Subject"))
                        if message.fields.get(key)],
            "where": f"attachment {cited_name}" if cited_name else ""}


def slides_pdf(document) -> FileResponse:
    """The deck rendered to PDF (made on first request, then cached), for the PDF viewer."""
    if document.detected_type not in SLIDE_TYPES:
        raise Http404("Only a .pptx presentation has rendered slides.")
    try:
        path = slides_as_pdf(document.original, document.filename, preview_path(document))
    except UnreadableOriginal as exc:
        raise Http404(str(exc)) from None
    response = FileResponse(open(path, "rb"), content_type="application/pdf")
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["X-Content-Type-Options"] = "nosniff"
    return response


def email_attachment(document, number: int) -> FileResponse:
    """One attachment of an email, always as a download: its bytes are the sender's, never shown inline."""
    try:
        attachments = read_email(document.original).attachments if document.detected_type in EMAIL_TYPES else []
    except UnreadableOriginal as exc:
        raise Http404(str(exc)) from None
    if not 0 < number <= len(attachments):
        raise Http404("This email has no such attachment.")
    name, data = attachments[number - 1]
    # The sender chose the name: no path and no control characters reach the header.
    filename = "".join(ch for ch in name.replace("\\", "/").rsplit("/", 1)[-1] if ch.isprintable()).strip()
    filename = filename or f"attachment-{number}"
    response = FileResponse(BytesIO(data), as_attachment=True, filename=filename,
                            content_type="application/octet-stream")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return response
