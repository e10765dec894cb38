"""Detecting a file's type from its content; the extension only breaks ties between kinds of plain text."""

import json
import re
import zipfile
import zlib
from pathlib import Path

import olefile

from .base import ParseError
from .charset import guess_encoding, is_probably_text
from .tabular import sniff_delimiter

SAMPLE_BYTES = 64 * 1024

# Zip bomb limits, checked on the central directory before any parser opens the archive: real Office
# files and e-books stay far below 1 GB expanded, and compress 2-20x (a 100x ratio over 50 MB is a bomb).
MAX_UNCOMPRESSED_BYTES = 1024**3
MAX_RATIO = 100
RATIO_CHECK_ABOVE_BYTES = 50 * 1024**2
MAX_ZIP_ENTRIES = 20_000

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

_IMAGE_MAGIC = (
    b"\x89PNG\r\n\x1a\n",
    b"\xff\xd8\xff",
    b"GIF87a",
    b"GIF89a",
    b"II*\x00",
    b"MM\x00*",
)

# Only to name what we refuse; everything not recognised is refused anyway.
_UNSUPPORTED_MAGIC = (
    (b"Rar!", "RAR archive"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"\x1f\x8b", "gzip archive"),
    (b"BZh", "bzip2 archive"),
    (b"\x7fELF", "executable program"),
    (b"MZ", "Windows program"),
    (b"ID3", "MP3 audio"),
    (b"OggS", "Ogg audio/video"),
    (b"fLaC", "FLAC audio"),
    (b"\x1aE\xdf\xa3", "Matroska/WebM video"),
    (b"SQLite format 3\x00", "SQLite database"),
)

# Extensions that only say which flavour of plain text a file is: content cannot tell Markdown from txt.
_TEXT_HINTS = {
    "md": "md",
    "markdown": "md",
    "mdown": "md",
    "mkd": "md",
    "rst": "rst",
    "rest": "rst",
    "org": "org",
    "csv": "csv",
    "tsv": "tsv",
    "tab": "tsv",
    "json": "json",
    "jsonl": "json",
    "ndjson": "json",
    "txt": "txt",
    "text": "txt",
    "log": "txt",
}

_EMAIL_HEADERS = {"from", "to", "cc", "subject", "date", "message-id", "mime-version", "received", "return-path"}
_EMAIL_ANCHORS = {"from", "to", "received", "message-id", "mime-version"}
_HEADER_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*):[ \t]?")
_MARKUP_PROLOGUE = re.compile(r"^(\s|<\?xml[^>]*\?>|<!--.*?-->|<!DOCTYPE[^>[]*(\[.*?\])?\s*>)*", re.I | re.S)
_HTML_ROOT = re.compile(r"<(html|head|body|div|p|table|h[1-6]|title|meta|span|ul|section|article|br)[\s/>]", re.I)
_SRT_START = re.compile(r"^\d+[ \t]*\r?\n\d{1,2}:\d{2}:\d{2},\d{3}[ \t]*-->")
_JSON_START = re.compile(r'^\s*(\{\s*("|\})|\[\s*(\{|\[|"|-?\d|true|false|null|\]))')


def extension(filename: str) -> str:
    return Path(filename).suffix.lower().lstrip(".")


def detect_type(path: Path, filename: str = "") -> str:
    """The detected type of a non-empty file, or ParseError for what we cannot or will not read."""
    with open(path, "rb") as f:
        head = f.read(SAMPLE_BYTES)
    if not head:
        raise ParseError("The file is empty.")
    if head.startswith(OLE_MAGIC):
        return _ole_type(path)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _zip_type(path)
    # The PDF spec lets readers accept junk before the header, and real files have it.
    if b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(_IMAGE_MAGIC) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP") or _is_bmp(head):
        return "image"
    if head[4:12] in (b"ftypheic", b"ftypheix", b"ftypmif1", b"ftyphevc"):
        raise ParseError("Unsupported file type: HEIC image (convert it to JPEG or PNG).")
    if head.lstrip().startswith(b"{\\rtf"):
        return "rtf"
    if is_probably_text(head):
        return _text_type(head, path, filename)
    for magic, name in _UNSUPPORTED_MAGIC:
        if head.startswith(magic):
            raise ParseError(f"Unsupported file type: {name}.")
    if head[4:8] == b"ftyp":
        raise ParseError("Unsupported file type: MP4/QuickTime media.")
    ext = extension(filename)
    described = f".{ext} file" if ext else "binary file"
    raise ParseError(f"Unsupported file type: unrecognised {described} content.")


def _is_bmp(head: bytes) -> bool:
    # "BM" alone is too common a text prefix; the DIB header size pins it down.
    return head[:2] == b"BM" and len(head) > 18 and int.from_bytes(head[14:18], "little") in (12, 40, 52, 56, 108, 124)


def _ole_type(path: Path) -> str:
    try:
        with olefile.OleFileIO(str(path)) as ole:
            names = {"/".join(entry).lower() for entry in ole.listdir(streams=True, storages=True)}
            word = ole.openstream("WordDocument").read(12) if "worddocument" in names else b""
    except Exception as exc:  # olefile raises OSError, struct.error, IndexError… on damaged files
        raise ParseError(f"The Office file is damaged or truncated: {exc}") from exc
    # Password-protected OOXML (docx/xlsx/pptx) is stored as an OLE container with these streams.
    if "encryptioninfo" in names or "encryptedpackage" in names:
        raise ParseError("The document is password-protected.")
    if "worddocument" in names:
        # FIB flag fEncrypted (0x0100 at offset 10), [MS-DOC] 2.5.2.
        if len(word) >= 12 and int.from_bytes(word[10:12], "little") & 0x0100:
            raise ParseError("The document is password-protected.")
        return "doc"
    if "workbook" in names or "book" in names:
        return "xls"
    if "powerpoint document" in names:
        return "ppt"
    if "__properties_version1.0" in names or any(name.startswith("__substg1.0_") for name in names):
        return "msg"
    raise ParseError("Unsupported file type: unrecognised Microsoft Office (OLE) file.")


def check_zip_limits(infos: list[zipfile.ZipInfo], archive_size: int) -> None:
    """ParseError for archives whose declared expansion is absurd (zip bombs)."""
    if len(infos) > MAX_ZIP_ENTRIES:
        raise ParseError(f"The archive has {len(infos)} entries; refusing to open it (possible zip bomb).")
    total = sum(info.file_size for info in infos)
    if total > MAX_UNCOMPRESSED_BYTES:
        raise ParseError(f"The archive expands to {total // 1024**2} MB; refusing to open it (possible zip bomb).")
    compressed = max(1, min(archive_size, sum(info.compress_size for info in infos) or archive_size))
    suspicious = [
        i for i in infos if i.file_size > RATIO_CHECK_ABOVE_BYTES and i.file_size > MAX_RATIO * i.compress_size
    ]
    if suspicious or (total > RATIO_CHECK_ABOVE_BYTES and total > MAX_RATIO * compressed):
        raise ParseError("The archive is compressed more than 100 times; refusing to open it (possible zip bomb).")


def _zip_type(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            check_zip_limits(infos, path.stat().st_size)
            names = {info.filename for info in infos}
            content_types = _read_small(zf, "[Content_Types].xml") if "[Content_Types].xml" in names else ""
            mimetype = _read_small(zf, "mimetype").strip() if "mimetype" in names else ""
    except ParseError:
        raise
    except (zipfile.BadZipFile, zlib.error, NotImplementedError, OSError, EOFError, ValueError, KeyError) as exc:
        raise ParseError(f"The file is a damaged or truncated ZIP/Office document: {exc}") from exc
    if content_types or any(n.startswith(("word/", "xl/", "ppt/")) for n in names):
        if "wordprocessingml" in content_types or "word/document.xml" in names:
            return "docx"
        if "spreadsheetml" in content_types or "xl/workbook.xml" in names:
            return "xlsx"
        if "presentationml" in content_types or "ppt/presentation.xml" in names:
            return "pptx"
    if mimetype == "application/epub+zip" or ("META-INF/container.xml" in names and not mimetype):
        return "epub"
    if mimetype == "application/vnd.oasis.opendocument.text":
        return "odt"
    if mimetype.startswith("application/vnd.oasis.opendocument"):
        kind = mimetype.rsplit(".", 1)[-1]
        raise ParseError(f"Unsupported file type: OpenDocument {kind} (save it as an Office file).")
    raise ParseError("Unsupported file type: ZIP archive.")


def _read_small(zf: zipfile.ZipFile, name: str, limit: int = 1024**2) -> str:
    with zf.open(name) as member:
        return member.read(limit).decode("utf-8", errors="replace")


def _text_type(head: bytes, path: Path, filename: str) -> str:
    text = head.decode(guess_encoding(head), errors="replace").lstrip("\ufeff")
    stripped = text.lstrip()
    hint = _TEXT_HINTS.get(extension(filename))
    if stripped.startswith("WEBVTT") or _SRT_START.match(stripped):
        return "vtt"  # the WebVTT parser reads SubRip too
    if stripped.startswith("<"):
        return _markup_type(stripped, hint)
    if hint != "json" and _is_email(text):
        return "eml"
    if _JSON_START.match(stripped) and (hint in (None, "json", "txt") or _is_json(text, path)):
        return "json"
    if hint == "json":
        return "json" if _is_json(text, path) else "txt"
    if hint in ("csv", "tsv"):
        return hint if _delimited(text, "\t" if hint == "tsv" else None) else "txt"
    if hint and hint != "txt":
        return hint
    if hint is None:
        return _sniff_plain_text(text)
    return _sniff_table(text) or "txt"


def _markup_type(text: str, hint: str | None) -> str:
    body = text[_MARKUP_PROLOGUE.match(text).end() :]
    lowered = text[:2048].lower()
    if "<!doctype html" in lowered or re.match(r"<(html|head|body)[\s>]", body[:6], re.I):
        return "html"
    if body[:4].lower() == "<svg":
        return "svg"
    # README-style Markdown often opens with raw HTML (<p align="center">…) and stays Markdown; an XML
    # declaration never starts one.
    if hint in ("md", "rst", "org") and not text.startswith("<?xml"):
        return hint
    if _HTML_ROOT.match(body):
        return "html"
    return "xml"


def _is_email(text: str) -> bool:
    lines = text.split("\n", 200)
    if lines[0].startswith("From ") and len(lines) > 1:  # mbox separator line
        lines = lines[1:]
    seen: set[str] = set()
    for line in lines[:200]:
        if not line.strip():
            break
        if line[0] in " \t":  # folded continuation of the previous header
            continue
        match = _HEADER_LINE.match(line)
        if not match:
            return False
        seen.add(match.group(1).lower())
    known = seen & _EMAIL_HEADERS
    return len(known) >= 2 and bool(known & _EMAIL_ANCHORS)


def _is_json(text: str, path: Path) -> bool:
    if path.stat().st_size <= SAMPLE_BYTES:
        try:
            json.loads(text)
            return True
        except ValueError:
            pass
    lines = [line for line in text.splitlines()[:5] if line.strip()]
    try:  # JSON Lines: judge the first few complete records
        return bool(lines) and all(isinstance(json.loads(line), (dict, list)) for line in lines[:-1] or lines)
    except ValueError:
        return False


def _delimited(text: str, delimiter: str | None) -> bool:
    return sniff_delimiter(text, preferred=delimiter) is not None


def _sniff_plain_text(text: str) -> str:
    lines = text.splitlines()[:400]
    headings = sum(1 for line in lines if re.match(r"#{1,6} \S", line))
    table_rule = any(re.match(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$", line) for line in lines)
    signals = (
        headings > 0,
        table_rule,
        any(line.startswith(("```", "~~~")) for line in lines),
        any(re.search(r"\[[^\]]+\]\([^)\s]+\)", line) for line in lines),
    )
    if headings >= 2 or table_rule or sum(signals) >= 2:
        return "md"
    if any(re.match(r"\*+ \S", line) for line in lines) and any(line.lower().startswith("#+") for line in lines):
        return "org"
    if any(line.startswith(".. ") for line in lines) and any(re.fullmatch(r"([=\-^~*#])\1{2,}", ln) for ln in lines):
        return "rst"
    return _sniff_table(text) or "txt"


def _sniff_table(text: str) -> str | None:
    """csv/tsv for text that is clearly a table: five or more lines of a consistent three-plus columns."""
    lines = [line for line in text.splitlines()[:50] if line.strip()]
    delimiter = sniff_delimiter(text) if len(lines) >= 5 else None
    if delimiter is None or delimiter == "|":
        return None
    if delimiter != "\t" and max(len(line.split(delimiter)) for line in lines) < 3:
        return None
    return "tsv" if delimiter == "\t" else "csv"
