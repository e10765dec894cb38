"""Long-tail formats (EPUB, ODT, RTF, reST, Org, XML, JSON, MSG) parse structurally and strictly offline."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ingest.parsing import fallback
from ingest.parsing.base import ParseError
from ingest.parsing.dispatch import parse_file
from tests.conftest import DOCS

REPO = Path(__file__).resolve().parents[1]


def test_epub_chapters_become_sections_under_the_book_title():
    doc = parse_file(DOCS / "winter-sports.epub", "winter-sports.epub")
    assert doc.detected_type == "epub" and doc.metadata["title"] == "Winter Sports in Switzerland"
    assert all(s.section_path[0] == "Winter Sports in Switzerland" for s in doc.sections)
    sun_seeker = [s for s in doc.sections if s.section_path[-1] == "CHAPTER I THE SUN-SEEKER"]
    assert sun_seeker and "an amazingly silly proverb" in sun_seeker[0].text
    contents = next(b for s in doc.sections for b in s.blocks if b.kind == "table")
    assert "I. | The Sun-seeker | 1" in contents.text


def test_odt_headings_lists_and_paragraphs():
    doc = parse_file(DOCS / "simple.odt", "simple.odt")
    (section,) = doc.sections
    assert section.section_path == ["These are a few of my favorite things:"]
    assert [b.kind for b in section.blocks if b.kind == "list"] == ["list"]
    assert "- Hockey" in section.text and "This is my third thought." in section.text


def test_rtf_heading_paragraphs_and_table():
    doc = parse_file(DOCS / "fake-doc.rtf", "fake-doc.rtf")
    (section,) = doc.sections
    assert section.section_path == ["My First Heading"]
    assert [b.text for b in section.blocks[:2]] == ["My first paragraph.", "Table Example:"]
    table = section.blocks[2]
    assert table.kind == "table"
    assert table.text.split("\n") == [
        "Column 1 | Column 2",
        "Row 1, Cell 1 | Row 1, Cell 2",
        "Row 2, Cell 1 | Row 2, Cell 2",
    ]


def test_rtf_unicode_and_codepage_escapes(tmp_path):
    chinese = tmp_path / "zh.rtf"
    chinese.write_bytes(
        rb"{\rtf1\ansi\ansicpg936{\fonttbl{\f0 SimSun;}}{\*\generator Riched20;}"
        rb"\pard \'b4\'ba\'bd\'da\par \uc1\u25918?\u20551?\par}"
    )
    assert [b.text for b in fallback.parse(chinese, filename="zh.rtf").sections[0].blocks] == ["春节", "放假"]
    western = tmp_path / "fr.rtf"
    western.write_bytes(rb"{\rtf1\ansi{\info{\title hidden}}caf\'e9 \u8212-\par\trowd a\cell b\cell\row}")
    texts = [b.text for b in fallback.parse(western, filename="fr.rtf").sections[0].blocks]
    assert texts == ["caf\u00e9 \u2014", "a | b"]


@pytest.mark.parametrize("name", ["README.rst", "README.org"])
def test_rst_and_org_headings_code_and_lists(name):
    doc = parse_file(DOCS / name, name)
    assert [s.section_path for s in doc.sections] == [["Example Docs"], ["Example Docs", "XBRL 10-K"]]
    intro, xbrl = doc.sections
    assert [b.kind for b in intro.blocks] == ["paragraph", "list", "paragraph"]
    assert "example-10k.html - A 10-K SEC filing in HTML format" in intro.blocks[1].text
    code = next(b for b in xbrl.blocks if b.kind == "code")
    assert code.text.startswith("curl -O \\") and code.metadata["language"] == "bash"


def test_xml_records_read_as_rows():
    doc = parse_file(DOCS / "factbook.xml", "factbook.xml")
    texts = [b.text for b in doc.sections[0].blocks]
    assert texts[0] == "country — name: United States | capital: Washington, DC | leader: Joe Biden | sport: Baseball"
    assert texts[3].startswith("country — name: Trinidad & Tobado")


def test_xml_entities_are_never_expanded(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    path = tmp_path / "evil.xml"
    path.write_text(
        f'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file://{secret}">]><r><a>&x;</a><b>visible</b></r>'
    )
    doc = parse_file(path, "evil.xml")
    assert "TOP-SECRET" not in "".join(s.text for s in doc.sections)
    assert "visible" in doc.sections[0].text


def test_json_records_and_nested_keys(tmp_path):
    records = parse_file(DOCS / "simple.json", "simple.json")
    first = records.sections[0].blocks[0].text
    assert first.startswith("element_id: a06d2d9e65212d4aa955c3ab32950ffa | metadata.category_depth: 0")
    assert "text: These are a few of my favorite things: | type: Title" in first
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"name": "loci", "version": 2, "owners": [{"name": "alice", "role": "admin"}]}))
    doc = parse_file(path, "config.json")
    assert [(s.section_path, s.text) for s in doc.sections] == [
        (["config"], "name: loci\nversion: 2"),
        (["config", "owners"], "name: alice | role: admin"),
    ]


@pytest.mark.parametrize(
    "name, content, reason",
    [
        ("broken.json", b'{"a": [1, 2', "Could not read the JSON file"),
        ("broken.xml", b"<?xml version='1.0'?><a><b></a>", "Could not read the XML file"),
        ("broken.rtf", rb"{\rtf1 {\*\generator x;}}", "contains no readable text"),
    ],
)
def test_malformed_files_fail_with_the_format_named(tmp_path, name, content, reason):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ParseError, match=reason):
        parse_file(path, name)


def test_epub_without_its_package_file_fails_readably(tmp_path):
    path = tmp_path / "book.epub"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip")
        zf.writestr(
            "META-INF/container.xml", '<container><rootfiles><rootfile full-path="x.opf"/></rootfiles></container>'
        )
    with pytest.raises(ParseError, match="Could not read the EPUB file"):
        parse_file(path, "book.epub")


# Runs in a child process where any connection or DNS lookup off the loopback is refused and recorded,
# with proxies pointing at a closed port, so a hidden download would fail the parse or show up here.
_OFFLINE_RUNNER = r"""
import json, socket, sys
attempts = []
_connect, _getaddrinfo = socket.socket.connect, socket.getaddrinfo

def _local(host):
    return host in ("localhost", "::1", "") or str(host).startswith("127.")

def connect(self, address):
    # Port 9 is the proxy below: reaching it means something tried to go out through a proxy.
    if self.family != socket.AF_UNIX and (not _local(address[0]) or address[1] == 9):
        attempts.append(repr(address))
        raise OSError("network is disabled in this test")
    return _connect(self, address)

def getaddrinfo(host, *args, **kwargs):
    if not _local(host):
        attempts.append(f"dns:{host}")
        raise socket.gaierror("network is disabled in this test")
    return _getaddrinfo(host, *args, **kwargs)

socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo

from pathlib import Path
from ingest.parsing.base import ParseError
from ingest.parsing.dispatch import parse_file

results = {}
for name in sys.argv[1:]:
    path = Path(name)
    try:
        doc = parse_file(path, path.name)
        results[path.name] = {"type": doc.detected_type, "chars": sum(len(s.text) for s in doc.sections)}
    except ParseError as exc:
        results[path.name] = {"error": str(exc)}
print(json.dumps({"results": results, "attempts": attempts, "unstructured": "unstructured" in sys.modules}))
"""


def test_long_tail_formats_parse_with_the_network_blocked():
    files = ["winter-sports.epub", "simple.odt", "fake-doc.rtf", "README.rst", "README.org", "factbook.xml",
             "simple.json", "fake-email.msg", "fake-email-attachment.msg", "fake-encrypted.msg"]  # fmt: skip
    proxy = "http://127.0.0.1:9"
    env = {**os.environ, "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy}
    env.pop("NO_PROXY", None)
    run = subprocess.run(
        [sys.executable, "-c", _OFFLINE_RUNNER, *(str(DOCS / f) for f in files)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["attempts"] == []
    assert report["unstructured"] is False
    results = report["results"]
    expected = {"winter-sports.epub": "epub", "simple.odt": "odt", "fake-doc.rtf": "rtf", "README.rst": "rst",
                "README.org": "org", "factbook.xml": "xml", "simple.json": "json", "fake-email.msg": "msg",
                "fake-email-attachment.msg": "msg"}  # fmt: skip
    for name, kind in expected.items():
        assert results[name]["type"] == kind, results[name]
        assert results[name]["chars"] > 50, name
    assert results["fake-encrypted.msg"] == {"error": "The email is encrypted and cannot be read."}
