"""Parsers stop hostile files early with the true reason: the OCR budget, images too small to read,
emails nested to exhaust the stack, and a stage's time limit never reported as a damaged file."""

import io
import signal
import time

import pymupdf
import pytest
from celery.exceptions import SoftTimeLimitExceeded
from PIL import Image

from ingest.parsing.base import ParseError
from ingest.parsing.dispatch import parse_file


def _png(size: tuple[int, int], colour=200) -> bytes:
    out = io.BytesIO()
    Image.new("L", size, colour).save(out, "PNG")
    return out.getvalue()


def _image_pdf(path, pages: int, *, pixels: tuple[int, int], shown: float, text: str = "", text_page: str = ""):
    """`pages` pages, each with one image of `pixels` drawn `shown` points wide and a few characters."""
    document = pymupdf.open()
    image = _png(pixels)
    if text_page:
        document.new_page().insert_text((72, 72), text_page, fontsize=11)
    for number in range(pages):
        page = document.new_page()
        page.insert_image(pymupdf.Rect(72, 72, 72 + shown, 72 + shown), stream=image)
        if text:
            page.insert_text((72, 700), f"{text}{number}", fontsize=9)
    document.save(path)
    return path


def test_pages_whose_images_cannot_hold_text_are_not_ocrd(tmp_path):
    # Each page: a 4x4-pixel image and a page number, what a 3,000-page hostile upload carried.
    pdf = _image_pdf(tmp_path / "tiny.pdf", 20, pixels=(4, 4), shown=4, text="p")
    started = time.monotonic()
    with pytest.raises(ParseError) as exc:
        parse_file(pdf, "tiny.pdf")
    assert time.monotonic() - started < 5  # OCR of 20 pages at 300 dpi took 20-30 s
    assert "images too small to hold text" in str(exc.value)


def test_text_pages_beside_tiny_images_are_read_without_ocr(tmp_path):
    pdf = _image_pdf(tmp_path / "mixed.pdf", 10, pixels=(8, 8), shown=6, text="p",
                     text_page="The quarterly report covers revenue, hiring and the new office.")
    parsed = parse_file(pdf, "mixed.pdf")
    assert parsed.metadata["ocr_pages"] == []
    assert any("10 page(s)" in w and "not OCR'd" in w for w in parsed.metadata["warnings"])
    assert "quarterly report" in " ".join(b.text for s in parsed.sections for b in s.blocks)


def test_a_pdf_over_the_ocr_budget_fails_at_once_with_the_true_reason(tmp_path, settings):
    settings.LOCI_OCR_MAX_PAGES = 5
    pdf = _image_pdf(tmp_path / "scan.pdf", 8, pixels=(600, 800), shown=400)
    started = time.monotonic()
    with pytest.raises(ParseError) as exc:
        parse_file(pdf, "scan.pdf")
    assert str(exc.value) == "The PDF needs OCR on 8 pages; the limit is 5 (LOCI_OCR_MAX_PAGES)."
    assert time.monotonic() - started < 3  # refused before the first page is OCR'd


def test_a_multi_page_tiff_over_the_ocr_budget_is_refused(tmp_path, settings):
    settings.LOCI_OCR_MAX_PAGES = 2
    frames = [Image.new("L", (200, 100), 255) for _ in range(3)]
    path = tmp_path / "scan.tiff"
    frames[0].save(path, save_all=True, append_images=frames[1:])
    with pytest.raises(ParseError, match=r"The image needs OCR on 3 pages; the limit is 2 \(LOCI_OCR_MAX_PAGES\)"):
        parse_file(path, "scan.tiff")


def test_a_stage_time_limit_during_ocr_is_not_reported_as_a_damaged_pdf(tmp_path):
    """Celery's soft time limit arrives as a signal that raises SoftTimeLimitExceeded wherever the worker is."""
    pdf = _image_pdf(tmp_path / "scan.pdf", 3, pixels=(1200, 1600), shown=500)

    def soft_limit(signum, frame):
        raise SoftTimeLimitExceeded()

    previous = signal.signal(signal.SIGALRM, soft_limit)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(SoftTimeLimitExceeded):
            parse_file(pdf, "scan.pdf")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _nested_rfc822(depth: int) -> bytes:
    message = b"From: a@example.com\r\nSubject: innermost\r\n\r\nhello\r\n"
    for level in range(depth):
        message = (b"From: a@example.com\r\nSubject: level %d\r\nMIME-Version: 1.0\r\n"
                   b"Content-Type: message/rfc822\r\n\r\n" % level) + message
    return message


def _nested_multipart(depth: int) -> bytes:
    body = b"Content-Type: text/plain\r\n\r\nhello\r\n"
    for level in range(depth):
        boundary = b"b%d" % level
        body = (b"Content-Type: multipart/mixed; boundary=" + boundary + b"\r\n\r\n--" + boundary + b"\r\n"
                + body + b"\r\n--" + boundary + b"--\r\n")
    return b"From: a@example.com\r\nSubject: deep\r\nMIME-Version: 1.0\r\n" + body


@pytest.mark.parametrize("build", [_nested_rfc822, _nested_multipart])
@pytest.mark.parametrize("depth", [40, 1000])
def test_an_email_nested_too_deep_fails_with_a_clear_reason(tmp_path, build, depth):
    path = tmp_path / "deep.eml"
    path.write_bytes(build(depth))
    with pytest.raises(ParseError) as exc:
        parse_file(path, "deep.eml")
    assert str(exc.value) == "The email nests attachments more than 30 deep; it was not read."


def test_an_ordinarily_nested_email_is_still_read(tmp_path):
    path = tmp_path / "forwarded.eml"
    path.write_bytes(_nested_rfc822(2))
    parsed = parse_file(path, "forwarded.eml")
    assert parsed.sections[0].title == "level 1"
