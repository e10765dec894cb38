"""Tesseract OCR run as a subprocess: one page image in, its paragraphs of text out."""

import os
import subprocess
import unicodedata
from dataclasses import dataclass

from django.conf import settings

from .base import ParseError, TransientParseError

OCR_LANGUAGES = "chi_sim+eng"
# A 300 dpi A4 page takes 2-4 s on one core; 120 s only trips on pathological images or a starved machine.
OCR_TIMEOUT = 120.0
# Tesseract's OpenMP threads fight each other (and other workers) on small machines: one thread per
# process is 4-10x faster on 2 cores than the default.
_TESSERACT_ENV = {"OMP_THREAD_LIMIT": "1"}


@dataclass
class OcrPage:
    paragraphs: list[str]
    confidence: float | None  # mean word confidence 0-100, None when no words were found


def check_ocr_budget(pages: int, what: str) -> None:
    """Refuse a document that needs more OCR than LOCI_OCR_MAX_PAGES, before any of it is done."""
    limit = settings.LOCI_OCR_MAX_PAGES
    if pages > limit:
        raise ParseError(f"The {what} needs OCR on {pages} pages; the limit is {limit} (LOCI_OCR_MAX_PAGES).")


def ocr_image(image: bytes, *, dpi: int | None = None, timeout: float = OCR_TIMEOUT) -> OcrPage:
    """OCR one encoded image (PNG, PNM, TIFF… anything leptonica reads) with tesseract's TSV output."""
    cmd = ["tesseract", "stdin", "stdout", "-l", OCR_LANGUAGES]
    if dpi:
        cmd += ["--dpi", str(dpi)]
    cmd.append("tsv")
    try:
        proc = subprocess.run(
            cmd, input=image, capture_output=True, timeout=timeout, env={**os.environ, **_TESSERACT_ENV}
        )
    except FileNotFoundError as exc:
        raise ParseError("OCR is not available on this server (tesseract is not installed).") from exc
    except subprocess.TimeoutExpired as exc:
        raise TransientParseError(f"OCR timed out after {timeout:g} s.") from exc
    if proc.returncode != 0:
        reason = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["unknown error"]
        raise ParseError(f"OCR failed: {reason[0][:200]}")
    return parse_tsv(proc.stdout.decode("utf-8", "replace"))


def parse_tsv(tsv: str) -> OcrPage:
    """Group tesseract TSV words into paragraphs (block, paragraph) and lines."""
    paragraphs: dict[tuple[str, str], list[list[str]]] = {}
    line_keys: dict[tuple[str, str], str] = {}
    confidences = []
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        # level 5 rows are words: level page block par line word left top width height conf text
        if len(cols) != 12 or cols[0] != "5" or not cols[11].strip():
            continue
        par_key, line = (cols[2], cols[3]), cols[4]
        lines = paragraphs.setdefault(par_key, [])
        if line_keys.get(par_key) != line:
            line_keys[par_key] = line
            lines.append([])
        lines[-1].append(cols[11].strip())
        try:
            confidences.append(float(cols[10]))
        except ValueError:
            pass
    texts = []
    for lines in paragraphs.values():
        text = join_lines(join_words(words) for words in lines)
        if text:
            texts.append(text)
    confidence = sum(confidences) / len(confidences) if confidences else None
    return OcrPage(paragraphs=texts, confidence=confidence)


def join_words(words) -> str:
    """Join tokens with spaces, except between two Chinese/Japanese characters (tesseract splits those per glyph)."""
    out = ""
    for word in words:
        if not word:
            continue
        if out and not (_is_cjk(out[-1]) and _is_cjk(word[0])) and not _is_wide_punctuation(word[0] + out[-1]):
            out += " "
        out += word
    return out


def join_lines(lines) -> str:
    """Join wrapped lines of one paragraph, undoing end-of-line hyphenation ("infor-" + "mation")."""
    out = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if len(out) > 1 and out[-1] == "-" and out[-2].isalpha() and line[0].islower():
            out = out[:-1] + line
        else:
            out = join_words([out, line])
    return out


def _is_cjk(char: str) -> bool:
    # Wide/fullwidth characters are ideographs, kana and their punctuation (。，、); Korean is wide too
    # but separates words with spaces.
    return unicodedata.east_asian_width(char) in ("W", "F") and not _is_hangul(char)


def _is_wide_punctuation(chars: str) -> bool:
    # 。，、）「 carry their own spacing: "platform。" not "platform 。".
    return any(unicodedata.category(c)[0] == "P" and unicodedata.east_asian_width(c) in ("W", "F") for c in chars)


def _is_hangul(char: str) -> bool:
    code = ord(char)
    return 0xAC00 <= code <= 0xD7A3 or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F
