"""Type detection by content, and the dispatcher's refusals: empty, too big, unsupported, bombs, encryption."""

import shutil
import zipfile

import olefile
import pytest

from ingest.parsing import dispatch
from ingest.parsing.base import ParseError
from ingest.parsing.detect import detect_type
from ingest.parsing.dispatch import parse_file
from tests.conftest import DOCS, SHARED_DATA


@pytest.mark.parametrize(
    "relative, expected",
    [
        ("pdf/fake-memo.pdf", "pdf"),
        ("img/example.jpg", "image"),
        ("img/bmp_24.bmp", "image"),
        ("img/layout-parser-paper-fast.tiff", "image"),
        ("fake.docx", "docx"),
        ("fake.doc", "doc"),
        ("tests-example.xls", "xls"),
        ("fake-power-point.ppt", "ppt"),
        ("fake-power-point.pptx", "pptx"),
        ("stanley-cups.xlsx", "xlsx"),
        ("fake-email.msg", "msg"),
        ("eml/fake-email-utf-16.eml", "eml"),
        ("winter-sports.epub", "epub"),
        ("simple.odt", "odt"),
        ("fake-doc.rtf", "rtf"),
        ("factbook.xml", "xml"),
        ("simple.json", "json"),
        ("stanley-cups-utf-16.csv", "csv"),
        ("stanley-cups.tsv", "tsv"),
        ("README.rst", "rst"),
        ("README.org", "org"),
        ("codeblock.md", "md"),
        ("fake-text-utf-16.txt", "txt"),
    ],
)
def test_it_detects_real_files_by_content_even_without_a_name(relative, expected):
    path = DOCS / relative
    assert detect_type(path, path.name) == expected
    if expected not in ("md", "rst", "org", "txt"):  # those differ only by convention, so the name decides
        assert detect_type(path, "upload.bin") == expected


@pytest.mark.parametrize(
    "relative, expected", [("language-docs/eng_spa_mult.doc", "docx"), ("language-docs/eng_spa_mult.ppt", "pptx")]
)
def test_it_sees_through_office_files_with_the_wrong_extension(relative, expected):
    assert detect_type(DOCS / relative, "eng_spa_mult" + relative[-4:]) == expected


def test_it_parses_a_mislabelled_file_by_what_it_is(tmp_path):
    page = tmp_path / "notes.txt"
    shutil.copyfile(DOCS / "fake-html.html", page)
    mail = tmp_path / "scan.pdf"
    shutil.copyfile(DOCS / "fake-email.eml", mail)

    html = parse_file(page, "notes.txt")
    assert html.detected_type == "html"
    assert ["My First Heading", "My Second Heading", "A Third Heading"] in [s.section_path for s in html.sections]
    assert parse_file(mail, "scan.pdf").detected_type == "eml"


def test_it_detects_markup_and_tables_in_nameless_text(tmp_path):
    nameless = tmp_path / "upload"
    for source, expected in [("simple-table.md", "md"), ("README.org", "org"), ("stanley-cups.csv", "csv")]:
        shutil.copyfile(DOCS / source, nameless)
        assert detect_type(nameless, "upload") == expected, source
    shutil.copyfile(DOCS / "book-war-and-peace-1p.txt", nameless)  # prose with commas is not a CSV
    assert detect_type(nameless, "upload") == "txt"


def test_empty_file_is_refused_with_a_readable_reason():
    with pytest.raises(ParseError, match="The file is empty."):
        parse_file(DOCS / "empty.txt", "empty.txt")


def test_it_refuses_files_over_the_size_limit():
    with pytest.raises(ParseError, match="too large"):
        parse_file(DOCS / "fake-html.html", "fake-html.html", max_bytes=100)


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"\x00\x01\x02\x03garbage\xff\xfe" * 100, "Unsupported file type: unrecognised .dat file content"),
        (b"Rar!\x1a\x07\x00" + bytes(range(256)) * 4, "RAR archive"),
    ],
)
def test_unknown_binary_is_unsupported(tmp_path, content, reason):
    path = tmp_path / "blob.dat"
    path.write_bytes(content)
    with pytest.raises(ParseError, match=reason):
        parse_file(path, "blob.dat")


def test_heic_and_plain_zip_archives_are_unsupported(tmp_path):
    with pytest.raises(ParseError, match="HEIC"):
        parse_file(DOCS / "img/DA-1p.heic", "DA-1p.heic")
    archive = tmp_path / "bundle.docx"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("readme.txt", "not an office document")
    with pytest.raises(ParseError, match="Unsupported file type: ZIP archive"):
        parse_file(archive, "bundle.docx")


def test_truncated_office_files_fail_readably(tmp_path):
    docx = tmp_path / "cut.docx"
    docx.write_bytes((DOCS / "fake.docx").read_bytes()[:5000])
    with pytest.raises(ParseError, match="damaged or truncated ZIP"):
        parse_file(docx, "cut.docx")
    doc = tmp_path / "cut.doc"
    doc.write_bytes((DOCS / "fake.doc").read_bytes()[:1024])
    with pytest.raises(ParseError, match="damaged or truncated"):
        parse_file(doc, "cut.doc")


def test_a_zip_bomb_is_refused_before_any_parser_opens_it(tmp_path, monkeypatch):
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", '<Types><Override ContentType="wordprocessingml"/></Types>')
        zf.writestr("word/document.xml", b"\0" * (60 * 1024**2))  # 60 MB of zeros deflate to ~60 KB
    assert bomb.stat().st_size < 1024**2

    def explode(*args, **kwargs):
        raise AssertionError("the docx parser must not see a zip bomb")

    monkeypatch.setitem(dispatch.PARSERS, "docx", "text")
    monkeypatch.setattr("ingest.parsing.text.parse", explode)
    with pytest.raises(ParseError, match="zip bomb"):
        parse_file(bomb, "bomb.docx")


def test_a_zip_that_claims_to_expand_past_a_gigabyte_is_refused(tmp_path):
    archive = tmp_path / "liar.xlsx"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("xl/workbook.xml", b"x" * 64)
    data = bytearray(archive.read_bytes())
    central = data.rfind(b"PK\x01\x02")
    data[central + 24 : central + 28] = (3 * 1024**3 // 2).to_bytes(4, "little")  # uncompressed size: 1.5 GB
    archive.write_bytes(bytes(data))
    with pytest.raises(ParseError, match="expands to 1536 MB"):
        detect_type(archive, "liar.xlsx")


def _rename_ole_stream(data: bytearray, old: str, new: str) -> None:
    """Rename a directory entry of a compound file in place (name: 64 bytes UTF-16LE, then its byte length)."""
    at = data.find(old.encode("utf-16-le") + b"\0\0")
    assert at > 0 and len(new) < 32
    data[at : at + 64] = (new.encode("utf-16-le") + b"\0\0").ljust(64, b"\0")
    data[at + 64 : at + 66] = (len(new) * 2 + 2).to_bytes(2, "little")


def test_password_protected_ooxml_is_refused(tmp_path):
    # Office stores an encrypted .docx/.xlsx as an OLE container with EncryptionInfo/EncryptedPackage.
    data = bytearray((DOCS / "fake.doc").read_bytes())
    _rename_ole_stream(data, "WordDocument", "EncryptionInfo")
    _rename_ole_stream(data, "1Table", "EncryptedPackage")
    locked = tmp_path / "locked.docx"
    locked.write_bytes(bytes(data))
    with pytest.raises(ParseError, match="The document is password-protected."):
        parse_file(locked, "locked.docx")


def test_password_protected_legacy_word_is_refused(tmp_path):
    source = DOCS / "fake-doc-emphasized-text.doc"
    with olefile.OleFileIO(str(source)) as ole:  # its WordDocument stream sits in regular sectors
        entry = ole.direntries[ole._find("WordDocument")]
        offset = (entry.isectStart + 1) * ole.sectorsize
    data = bytearray(source.read_bytes())
    assert data[offset : offset + 2] == b"\xec\xa5"  # the FIB's wIdent
    assert detect_type(source, source.name) == "doc"
    data[offset + 11] |= 0x01  # fEncrypted, bit 0x0100 of the flags word at offset 10
    locked = tmp_path / "locked.doc"
    locked.write_bytes(bytes(data))
    with pytest.raises(ParseError, match="The document is password-protected."):
        parse_file(locked, "locked.doc")


def test_an_encrypted_outlook_message_is_refused():
    with pytest.raises(ParseError, match="encrypted"):
        parse_file(DOCS / "fake-encrypted.msg", "fake-encrypted.msg")


def test_a_type_without_an_installed_parser_is_a_parse_error(monkeypatch):
    monkeypatch.setitem(dispatch.PARSERS, "vtt", "no_such_module")
    vtt = SHARED_DATA / "docs/vtt/xgplayer-zh/textTrack-1.vtt"
    with pytest.raises(ParseError, match="no parser for vtt files"):
        parse_file(vtt, vtt.name)


def test_dispatch_sets_the_detected_type_and_routes_to_the_right_parser():
    vtt = SHARED_DATA / "docs/vtt/xgplayer-zh/textTrack-1.vtt"
    assert parse_file(vtt, "captions.txt").detected_type == "vtt"
    org = parse_file(DOCS / "README.org", "README.org")
    assert org.detected_type == "org"
    assert ["Example Docs", "XBRL 10-K"] in [s.section_path for s in org.sections]
