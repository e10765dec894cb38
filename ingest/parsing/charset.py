"""Turning the bytes of a text file into str: BOMs, declared charsets, UTF-8, UTF-16, GB18030, cp1252."""

import codecs
import re
from dataclasses import dataclass

from charset_normalizer import from_bytes

_BOMS = (
    # UTF-32 first: its little-endian BOM starts with the UTF-16 one.
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# Labels that browsers (WHATWG Encoding) and mail clients read as a wider superset.
_SUPERSETS = {
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "cp936": "gb18030",
    "euc-cn": "gb18030",
    "iso-8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "ascii": "cp1252",
    "us-ascii": "cp1252",
}

# charset-normalizer guesses a Central/Baltic code page for short Western text ("crème" -> "crčme");
# cp1252 is the likelier writer whenever it decodes cleanly.
_LATIN_FAMILY = re.compile(r"^(cp125\d|iso8859_\d+|latin_\d|mac_\w+|cp437|cp850|cp1006|koi8_\w)$")
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")

# Enough bytes for charset-normalizer's statistics; more only costs time.
_SNIFF_BYTES = 256 * 1024


_CONTROLS = {code: None for code in range(32) if chr(code) not in "\t\n\f"}


@dataclass
class Decoded:
    text: str
    encoding: str


def canonical_charset(label: str | None) -> str | None:
    """A Python codec name for a declared charset label, or None if Python does not know it."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    label = _SUPERSETS.get(label, label)
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def bom_encoding(data: bytes) -> str | None:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    return None


def looks_like_utf16(data: bytes) -> str | None:
    """'utf-16-le'/'utf-16-be' for BOM-less UTF-16 of mostly ASCII text (NULs in every other byte)."""
    sample = data[:4096]
    if len(sample) < 4:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) > 0.4 * len(odd) and even.count(0) < 0.05 * len(even):
        return "utf-16-le"
    if even.count(0) > 0.4 * len(even) and odd.count(0) < 0.05 * len(odd):
        return "utf-16-be"
    return None


def _strict(data: bytes, encoding: str) -> str | None:
    try:
        return data.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return None


def _utf8_prefix_ok(sample: bytes) -> bool:
    """UTF-8 check of a sample that may end in the middle of a character."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
        return True
    except UnicodeDecodeError:
        return False


def _mostly_cjk(text: str) -> bool:
    wide = [ch for ch in text if ord(ch) > 0x7F]
    return bool(wide) and sum(1 for ch in wide if _CJK.match(ch)) >= 0.9 * len(wide)


def guess_encoding(data: bytes, declared: str | None = None) -> str:
    """The codec most likely to have written `data` (which may be a truncated sample)."""
    if bom := bom_encoding(data):
        return bom
    if (codec := canonical_charset(declared)) and _strict(data, codec) is not None:
        return codec
    # Before UTF-8: the NULs of BOM-less UTF-16 are valid UTF-8.
    if utf16 := looks_like_utf16(data):
        return utf16
    if _utf8_prefix_ok(data[:_SNIFF_BYTES]):
        return "utf-8"
    sample = data[:_SNIFF_BYTES]
    gb_text = codecs.getincrementaldecoder("gb18030")(errors="strict")
    try:
        # Simplified Chinese is our most common non-UTF-8 text, and charset-normalizer reads short
        # GBK as Big5; a clean GB18030 decode that yields CJK (Latin text almost never does) wins.
        if _mostly_cjk(gb_text.decode(sample, final=False)):
            return "gb18030"
    except UnicodeDecodeError:
        pass
    best = from_bytes(sample).best()
    if best is not None and not _LATIN_FAMILY.match(best.encoding):
        return best.encoding
    if _strict(sample, "cp1252") is not None or best is None:
        return "cp1252"
    return best.encoding


def decode_bytes(data: bytes, declared: str | None = None) -> Decoded:
    """Decode a whole text file; undecodable bytes become U+FFFD rather than failing the file."""
    encoding = guess_encoding(data, declared)
    for bom, bom_codec in _BOMS:
        if bom_codec == encoding and data.startswith(bom):
            data = data[len(bom) :]
            break
    text = data.decode(encoding, errors="replace")
    return Decoded(text=strip_controls(text.replace("\r\n", "\n").replace("\r", "\n")), encoding=encoding)


def strip_controls(text: str) -> str:
    """Drop C0 control characters other than tab/newline/form feed (PostgreSQL text cannot hold NUL)."""
    return text.translate(_CONTROLS)


def is_probably_text(sample: bytes) -> bool:
    """True when a leading sample of a file reads as text in some encoding (no binary control bytes)."""
    if not sample:
        return False
    if bom_encoding(sample) or looks_like_utf16(sample):
        return True
    controls = sum(1 for b in sample if b < 0x20 and b not in (0x09, 0x0A, 0x0C, 0x0D, 0x1B))
    if controls > max(2, len(sample) // 1000):
        return False
    return _utf8_prefix_ok(sample) or from_bytes(sample[:65536]).best() is not None
