"""Long-tail formats read in-process with no converter or download: EPUB, ODT, RTF, XML and JSON."""

# Why not unstructured here: its epub/odt/rtf/rst/org partitioners shell out to pandoc (not installed),
# its text heuristics load a spaCy model they download on first use, and importing it pings telemetry.

import json
import posixpath
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

from lxml import etree

from .base import Block, ParsedDocument, ParseError, Section
from .charset import decode_bytes
from .detect import detect_type
from .html import decode_html, document_title, html_items, parse_tree
from .tabular import render_table
from .text import PAGE_CHARS, Heading, build_sections, paginate

# XML from users is untrusted: no DTDs, no entity expansion (billion laughs, XXE), no network.
_XML_PARSER = dict(resolve_entities=False, no_network=True, load_dtd=False, remove_comments=True, remove_pis=True)
# A record's fields stay on one line when the values are short, like a spreadsheet row.
RECORD_VALUE_CHARS = 120

# What zipfile, zlib and lxml raise on damaged or truncated files.
_DAMAGE = (
    zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, KeyError, IndexError,
    etree.XMLSyntaxError, ValueError, UnicodeError, RecursionError,
)  # fmt: skip

_ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_ODF_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"


def parse(path: Path, *, filename: str, detected_type: str | None = None) -> ParsedDocument:
    """Parse an EPUB, ODT, RTF, XML or JSON file (which one: detected_type, else sniffed)."""
    kind = detected_type or detect_type(path, filename)
    readers = {"epub": _epub, "odt": _odt, "rtf": _rtf, "xml": _xml, "json": _json}
    if kind not in readers:
        raise ParseError(f"Unsupported file type: {kind}.")
    try:
        document = readers[kind](path, filename)
    except _DAMAGE as exc:
        raise ParseError(f"Could not read the {kind.upper()} file: {exc}") from exc
    if not any(section.blocks for section in document.sections):
        raise ParseError(f"The {kind.upper()} file contains no readable text.")
    return document


def _xml_root(data: bytes):
    return etree.fromstring(data, etree.XMLParser(**_XML_PARSER))


def _local(el) -> str:
    return etree.QName(el).localname if isinstance(el.tag, str) else ""


def _epub(path: Path, filename: str) -> ParsedDocument:
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        if "META-INF/encryption.xml" in names:
            encrypted = _xml_root(zf.read("META-INF/encryption.xml")).xpath("//*[local-name()='CipherReference']/@URI")
            # Obfuscated fonts are normal; encrypted chapters mean DRM.
            if any(re.search(r"\.x?html?$", uri, re.I) for uri in encrypted):
                raise ParseError("The e-book is DRM-protected.")
        container = _xml_root(zf.read("META-INF/container.xml"))
        opf_path = container.xpath("//*[local-name()='rootfile']/@full-path")[0]
        opf = _xml_root(zf.read(opf_path))
        book = " ".join(opf.xpath("string(//*[local-name()='metadata']/*[local-name()='title'])").split())
        book = book or Path(filename).stem
        manifest = {item.get("id"): item for item in opf.xpath("//*[local-name()='manifest']/*[local-name()='item']")}
        sections: list[Section] = []
        for number, ref in enumerate(opf.xpath("//*[local-name()='spine']/*[local-name()='itemref']"), 1):
            item = manifest.get(ref.get("idref"))
            if item is None or "html" not in (item.get("media-type") or ""):
                continue
            href = posixpath.normpath(posixpath.join(posixpath.dirname(opf_path), unquote(item.get("href", ""))))
            if href not in names:
                continue
            root = parse_tree(decode_html(zf.read(href)).text)
            chapter = document_title(root)
            for section in build_sections(html_items(root), title=chapter or book, path=[book]):
                if section.section_path[0] != book:
                    section.section_path.insert(0, book)
                section.metadata.update(chapter=number, href=href)
                sections.append(section)
    return ParsedDocument(detected_type="epub", sections=sections, metadata={"title": book})


def _odf_text(el) -> str:
    parts = [el.text or ""]
    for child in el:
        name = _local(child)
        if name == "s":
            parts.append(" " * int(child.get(f"{{{_ODF_TEXT}}}c", "1")))
        elif name == "tab":
            parts.append("\t")
        elif name == "line-break":
            parts.append("\n")
        elif name not in ("note", "annotation", "tracked-changes"):  # footnotes and comments break the flow
            parts.append(_odf_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _odf_list(el, depth: int = 0) -> list[str]:
    lines = []
    for item in el:
        for child in item:
            if _local(child) == "list":
                lines += _odf_list(child, depth + 1)
            elif text := " ".join(_odf_text(child).split()):
                lines.append(f"{'  ' * depth}- {text}")
    return lines


def _odf_table(el) -> list[Block]:
    header, rows = None, []
    for row in el.iter(f"{{{_ODF_TABLE}}}table-row"):
        cells = []
        for cell in row:
            text = " ".join(_odf_text(p) for p in cell).strip()
            # Repeats pad rows out to the sheet's 1024 columns; only filled cells are worth expanding.
            cells += [text] * (min(int(cell.get(f"{{{_ODF_TABLE}}}number-columns-repeated", "1")), 50) if text else 1)
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            continue
        if header is None and _local(row.getparent()) == "table-header-rows":
            header = cells
        else:
            rows.append(cells)
    if header is None and len(rows) > 1:
        header, rows = rows[0], rows[1:]
    return render_table(rows, header)


def _odf_items(el) -> Iterator[Heading | Block]:
    for child in el:
        name = _local(child)
        if name == "h":
            yield Heading(int(child.get(f"{{{_ODF_TEXT}}}outline-level", "1")), " ".join(_odf_text(child).split()))
        elif name == "p":
            yield Block(text=_odf_text(child).strip())
        elif name == "list":
            if lines := _odf_list(child):
                yield Block(text="\n".join(lines), kind="list")
        elif name == "table":
            yield from _odf_table(child)
        elif name not in ("tracked-changes", "sequence-decls", "variable-decls", "table-of-content"):
            yield from _odf_items(child)


def _odt(path: Path, filename: str) -> ParsedDocument:
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        if "META-INF/manifest.xml" in names and b"encryption-data" in zf.read("META-INF/manifest.xml"):
            raise ParseError("The document is password-protected.")
        root = _xml_root(zf.read("content.xml"))
        meta = _xml_root(zf.read("meta.xml")) if "meta.xml" in names else None
    title = " ".join(meta.xpath("string(//*[local-name()='title'])").split()) if meta is not None else ""
    body = root.xpath("//*[local-name()='body']/*[local-name()='text']")
    items = _odf_items(body[0]) if body else iter(())
    sections = build_sections(items, title=title or filename, path=[title or Path(filename).stem])
    return ParsedDocument(detected_type="odt", sections=sections, metadata={"title": title} if title else {})


_RTF_TOKEN = re.compile(r"\\([a-zA-Z]+)(-?\d+)? ?|\\'([0-9a-fA-F]{2})|\\([^a-zA-Z'])|([{}])|[\r\n]+|([^\\{}\r\n]+)")
# Destinations that hold no document text (fonts, styles, pictures, metadata, field instructions).
_RTF_SKIP = {
    "fonttbl", "colortbl", "stylesheet", "info", "pict", "object", "themedata", "colorschememapping",
    "latentstyles", "datastore", "xmlnstbl", "listtable", "listoverridetable", "rsidtbl", "generator",
    "fldinst", "header", "footer", "headerl", "headerr", "footerl", "footerr", "bkmkstart", "bkmkend",
}  # fmt: skip
_RTF_CHARS = {
    "par": "\n\n", "line": "\n", "sect": "\n\n", "page": "\n\n", "tab": "\t", "cell": "\x1f", "row": "\x1e",
    "emdash": "—", "endash": "–", "bullet": "•", "lquote": "‘", "rquote": "’", "ldblquote": "“", "rdblquote": "”",
}  # fmt: skip


def _rtf_text(data: str) -> tuple[list[tuple[int | None, str]], str]:
    """([(outline level or None, paragraph)], codepage) with table cells as \\x1f and rows as \\x1e."""
    codepage, out, pending = "cp1252", [], bytearray()
    paragraphs: list[tuple[int | None, str]] = []
    stack, skip, uc, skip_chars, level = [], False, 1, 0, None

    def flush_bytes() -> None:
        if pending:
            out.append(pending.decode(codepage, errors="replace"))
            pending.clear()

    for word, arg, hexbyte, symbol, brace, text in (m.groups() for m in _RTF_TOKEN.finditer(data)):
        if hexbyte:
            if skip_chars:
                skip_chars -= 1
            elif not skip:
                pending.append(int(hexbyte, 16))
            continue
        flush_bytes()
        if brace == "{":
            stack.append((skip, uc))
        elif brace == "}":
            skip, uc = stack.pop() if stack else (False, 1)
        elif symbol:
            if symbol == "*":
                skip = True  # \* marks an optional destination this reader does not know
            elif not skip and symbol in "\\{}":
                out.append(symbol)
            elif not skip and symbol == "~":
                out.append("\u00a0")
        elif word:
            if word in _RTF_SKIP:
                skip = True
            elif word == "ansicpg" and arg:
                codepage = "gb18030" if arg == "936" else f"cp{arg}"
            elif word == "uc" and arg:
                uc = int(arg)
            elif word == "u" and arg and not skip:
                out.append(chr(int(arg) % 65536))
                skip_chars = uc
            elif word == "pard":
                level = None
            elif word == "outlinelevel" and arg:
                level = int(arg) + 1
            elif word in _RTF_CHARS and not skip:
                out.append(_RTF_CHARS[word])
                if word in ("par", "row"):
                    paragraphs.append((level if word == "par" else None, "".join(out)))
                    out.clear()
        elif text and not skip:
            if skip_chars:
                text, skip_chars = text[skip_chars:], max(0, skip_chars - len(text))
            out.append(text)
    flush_bytes()
    paragraphs.append((level, "".join(out)))
    return paragraphs, codepage


def _rtf_items(paragraphs: list[tuple[int | None, str]]) -> Iterator[Heading | Block]:
    rows: list[list[str]] = []
    for level, raw in paragraphs:
        if "\x1e" in raw or "\x1f" in raw:
            cells = [" ".join(c.split()) for c in raw.replace("\x1e", "").split("\x1f")]
            while cells and not cells[-1]:
                cells.pop()
            if cells:
                rows.append(cells)
            continue
        if rows:
            header, body = (rows[0], rows[1:]) if len(rows) > 1 else (None, rows)
            yield from render_table(body, header)
            rows = []
        text = "\n".join(" ".join(line.split()) for line in raw.strip().split("\n") if line.strip())
        if text:
            yield Heading(level, text) if level else Block(text=text)
    if rows:
        yield from render_table(rows[1:], rows[0]) if len(rows) > 1 else render_table(rows, None)


def _rtf(path: Path, filename: str) -> ParsedDocument:
    data = path.read_bytes().decode("latin-1")  # RTF is 7-bit; \'hh escapes carry the real bytes
    if not data.lstrip().startswith("{\\rtf"):
        raise ParseError("Could not read the RTF file: it does not start with {\\rtf.")
    paragraphs, codepage = _rtf_text(data)
    sections = build_sections(_rtf_items(paragraphs), title=filename, path=[Path(filename).stem])
    return ParsedDocument(detected_type="rtf", sections=sections, metadata={"codepage": codepage})


def _xml_blocks(el, blocks: list[Block]) -> None:
    kids = [child for child in el if isinstance(child.tag, str)]
    mixed = (el.text or "").strip() or any((child.tail or "").strip() for child in kids)
    if not kids or mixed:
        text = " ".join(" ".join(el.itertext()).split())
        if text:
            blocks.append(Block(text=f"{_local(el)}: {text}" if len(text) <= RECORD_VALUE_CHARS else text))
        return
    values = [(_local(kid), " ".join(" ".join(kid.itertext()).split())) for kid in kids]
    is_record = all(len(kid) == 0 for kid in kids) and all(len(v) <= RECORD_VALUE_CHARS for _, v in values)
    if is_record and len({name for name, _ in values}) > len(values) / 2:
        fields = [f"{k}: {v}" for k, v in el.attrib.items()] + [f"{k}: {v}" for k, v in values if v]
        blocks.append(Block(text=f"{_local(el)} — " + " | ".join(fields)))
        return
    for kid in kids:
        _xml_blocks(kid, blocks)


def _xml(path: Path, filename: str) -> ParsedDocument:
    root = _xml_root(path.read_bytes())
    blocks: list[Block] = []
    _xml_blocks(root, blocks)
    sections = paginate(filename, [Path(filename).stem], blocks, max_chars=PAGE_CHARS)
    return ParsedDocument(detected_type="xml", sections=sections, metadata={"root": _local(root)})


def _flatten(value, prefix: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _flatten(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        for index, item in enumerate(value):
            yield from _flatten(item, f"{prefix}[{index}]")
    elif isinstance(value, list):
        yield f"{prefix}: {', '.join(str(v) for v in value)}"
    elif value is not None and value != "":
        yield f"{prefix}: {value}" if prefix else str(value)


def _json_blocks(value) -> list[Block]:
    if isinstance(value, list):  # a list of records: one block per record, readable alone
        return [Block(text=" | ".join(_flatten(item)) or "") for item in value if item not in (None, "", {}, [])]
    return [Block(text="\n".join(_flatten(value)))]


def _json(path: Path, filename: str) -> ParsedDocument:
    text = decode_bytes(path.read_bytes()).text.lstrip("\ufeff")
    try:
        value = json.loads(text)
    except ValueError:
        value = [json.loads(line) for line in text.splitlines() if line.strip()]  # JSON Lines
    stem = Path(filename).stem
    if isinstance(value, dict) and value:
        # Scalar fields read together; each nested object or list is a section named by its key.
        scalars = {k: v for k, v in value.items() if not isinstance(v, (list, dict))}
        sections = paginate(filename, [stem], _json_blocks(scalars), max_chars=PAGE_CHARS) if scalars else []
        for key, item in value.items():
            if isinstance(item, (list, dict)):
                sections += paginate(str(key), [stem, str(key)], _json_blocks(item), max_chars=PAGE_CHARS)
    else:
        sections = paginate(filename, [stem], _json_blocks(value), max_chars=PAGE_CHARS)
    return ParsedDocument(detected_type="json", sections=sections)
