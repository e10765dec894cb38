"""Text-family parsers on real files: txt, Markdown, HTML, CSV/TSV and WebVTT, with their encodings."""

import pytest

from ingest.parsing import html, tabular, text, vtt
from ingest.parsing.base import ParseError
from ingest.parsing.dispatch import parse_file
from ingest.parsing.text import PAGE_CHARS
from tests.conftest import DOCS, SHARED_DATA

VTT = SHARED_DATA / "docs" / "vtt"


def blocks_of(document, kind=None):
    return [b for s in document.sections for b in s.blocks if kind is None or b.kind == kind]


# --- plain text -------------------------------------------------------------------------------------------


def test_txt_paragraphs_split_on_blank_lines():
    doc = text.parse(DOCS / "fake-text.txt", filename="fake-text.txt")
    assert doc.detected_type == "txt"
    section = doc.sections[0]
    assert (section.title, section.section_path) == ("fake-text.txt", ["fake-text"])
    assert [b.text for b in section.blocks][:3] == [
        "This is a test document to use for unit tests.",
        "Doylestown, PA 18901",
        "Important points:",
    ]


def test_utf16_text_is_decoded_and_dedented():
    doc = text.parse(DOCS / "fake-text-utf-16.txt", filename="fake-text-utf-16.txt")
    assert doc.metadata["encoding"] == "utf-16-le"
    assert "Doylestown, PA 18901" in [b.text for b in blocks_of(doc)]


def test_long_text_without_headings_is_cut_into_page_size_sections():
    doc = text.parse(DOCS / "language-docs/UDHR_first_article_all.txt", filename="udhr.txt")
    assert len(doc.sections) > 20
    assert all(s.section_path == ["udhr"] and s.title == "udhr.txt" for s in doc.sections)
    assert [s.metadata["part"] for s in doc.sections[:3]] == [1, 2, 3]
    assert max(len(s.text) for s in doc.sections) < 2 * PAGE_CHARS
    assert any("是人都生而自由" in s.text for s in doc.sections)


@pytest.mark.parametrize("encoding", ["gbk", "cp1252", "utf-8-sig"])
def test_legacy_encodings_are_detected(tmp_path, encoding):
    sample = "春节放假通知：春节放假从大年三十开始。" if encoding != "cp1252" else "Café crème brûlée — 15,50 €"
    path = tmp_path / "note.txt"
    path.write_bytes(sample.encode(encoding))
    assert text.parse(path, filename="note.txt").sections[0].blocks[0].text == sample


# --- Markdown ---------------------------------------------------------------------------------------------


def test_markdown_headings_become_section_paths_and_code_stays_code():
    doc = text.parse(DOCS / "README.md", filename="README.md")
    assert [s.section_path for s in doc.sections] == [["Example Docs"], ["Example Docs", "XBRL 10-K"]]
    kinds = [b.kind for b in doc.sections[0].blocks]
    assert kinds == ["paragraph", "list", "paragraph"]
    code = [b for b in doc.sections[1].blocks if b.kind == "code"]
    assert len(code) == 1 and code[0].text.startswith("curl -O") and code[0].metadata["language"] == "bash"


def test_markdown_code_fences_hide_their_hashes_and_tags():
    doc = text.parse(DOCS / "codeblock.md", filename="codeblock.md")
    assert [s.title for s in doc.sections] == ["HTML Example", "XML Example"]
    assert [b.kind for b in doc.sections[1].blocks] == ["code", "code"]
    assert "<heading>Reminder</heading>" in doc.sections[1].blocks[0].text


def test_markdown_tables_keep_their_header():
    doc = text.parse(DOCS / "simple-table.md", filename="simple-table.md")
    (table,) = blocks_of(doc, "table")
    assert table.text.split("\n") == ["Item | Price | # In stock", "Juicy Apples | 1.99 | 739", "Bananas | 1.89 | 6"]


def test_chinese_markdown_keeps_nested_and_empty_headings():
    doc = text.parse(DOCS / "zh_from_history/zho_md_partition.md", filename="notice.md")
    paths = [s.section_path for s in doc.sections]
    assert ["标题 2", "标题 3"] in paths
    assert ["春节放假通知"] in paths  # a heading with no body of its own is not dropped
    last = doc.sections[-1]
    assert last.section_path == ["Another Title 2"]
    assert [b.kind for b in last.blocks] == ["paragraph", "list", "paragraph"]


def test_setext_headings_and_front_matter(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text("---\ntitle: x\n---\nIntro line\n\nGuide\n=====\n\nBody.\n\nPart\n----\n\n- a\n- b\n")
    doc = text.parse(path, filename="guide.md")
    assert [(s.section_path, s.text) for s in doc.sections] == [
        (["guide"], "Intro line"),
        (["Guide"], "Body."),
        (["Guide", "Part"], "- a\n- b"),
    ]


def test_empty_and_whitespace_text_is_refused(tmp_path):
    path = tmp_path / "blank.md"
    path.write_text("\n   \n\t\n")
    with pytest.raises(ParseError, match="empty"):
        text.parse(path, filename="blank.md")


# --- HTML -------------------------------------------------------------------------------------------------


def test_html_headings_lists_and_tables():
    doc = html.parse(DOCS / "fake-html.html", filename="fake-html.html")
    first, second = doc.sections
    assert first.section_path == ["My First Heading", "My Second Heading"]
    assert first.blocks[1].kind == "list"
    assert first.blocks[1].text == "- A test list\n  - With sub-bullets!\n  - And another\n- Back at the root"
    assert second.section_path == ["My First Heading", "My Second Heading", "A Third Heading"]
    assert second.blocks[0].kind == "table"
    assert second.blocks[0].text.split("\n")[0] == "Column 1 | Column 2"
    assert second.blocks[0].metadata["header"] == ["Column 1", "Column 2"]


def test_html_drops_scripts_styles_and_navigation():
    doc = html.parse(DOCS / "example-with-scripts.html", filename="page.html")
    everything = "\n".join(s.text for s in doc.sections)
    assert "Russian Offensive Campaign Assessment" in doc.metadata["title"]
    assert "Belarusian forces remain unlikely to attack Ukraine" in everything
    for leaked in ("getElementsByTagName", "GoogleAnalyticsObject", "@import url", "Drupal.settings"):
        assert leaked in (DOCS / "example-with-scripts.html").read_text() and leaked not in everything


def test_html_data_tables_inside_layout_tables():
    doc = html.parse(DOCS / "example-steelJIS-datasheet.html", filename="steel.html")
    tables = [b.text for b in blocks_of(doc, "table")]
    composition = next(t for t in tables if t.startswith("C | Si | Mn"))
    assert composition.split("\n")[1].startswith("0.39 - 0.46 | 0.2 - 0.35")
    assert doc.sections[-1].section_path[-1] == "SNB22-3 Chemical composition, standards and properties"


def test_html_table_header_is_repeated_on_every_row_group(tmp_path):
    rows = "".join(f"<tr><td>item {i}</td><td>{i}</td></tr>" for i in range(45))
    path = tmp_path / "big.html"
    path.write_text(f"<h1>Stock</h1><table><thead><tr><th>Name</th><th>Qty</th></tr></thead>{rows}</table>")
    tables = blocks_of(html.parse(path, filename="big.html"), "table")
    assert len(tables) == 3
    assert all(t.text.startswith("Name | Qty\n") for t in tables)
    assert tables[2].text.endswith("item 44 | 44")


def test_gbk_html_is_decoded_from_meta_and_by_sniffing(tmp_path):
    body = (
        "<html><head>{meta}<title>通知</title></head>"
        "<body><h1>春节放假通知</h1><p>春节放假从大年三十开始。</p></body></html>"
    )
    declared = tmp_path / "declared.html"
    declared.write_bytes(body.format(meta='<meta charset="gb2312">').encode("gbk"))
    sniffed = tmp_path / "sniffed.html"
    sniffed.write_bytes(body.format(meta="").encode("gbk"))
    for path in (declared, sniffed):
        doc = html.parse(path, filename=path.name)
        assert doc.metadata["encoding"] == "gb18030"
        assert doc.sections[0].section_path == ["春节放假通知"]
        assert doc.sections[0].text == "春节放假从大年三十开始。"


def test_cp1252_html_without_declaration():
    doc = html.parse(DOCS / "fake-html-cp1252.html", filename="fake-html-cp1252.html")
    assert "Die schöne Frau" in doc.sections[0].text and "15,50 €" in doc.sections[0].text


def test_preformatted_html_becomes_paragraphs():
    doc = html.parse(DOCS / "fake-html-pre.htm", filename="law.htm")
    first = doc.sections[0].blocks
    assert first[0].text == "[107th Congress Public Law 56]\n[From the U.S. Government Printing Office]"
    assert len(doc.sections) > 50 and all(len(s.text) < 2 * PAGE_CHARS for s in doc.sections)


# --- CSV / TSV --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["stanley-cups.csv", "stanley-cups.tsv", "stanley-cups-utf-16.csv"])
def test_csv_rows_carry_their_headers(name):
    doc = tabular.parse(DOCS / name, filename=name)
    (section,) = doc.sections
    assert section.title == "Stanley Cups"  # the caption row above the header
    (block,) = section.blocks
    assert block.kind == "table"
    assert block.text.split("\n") == [
        "Team | Location | Stanley Cups",
        "Team: Blues | Location: STL | Stanley Cups: 1",
        "Team: Flyers | Location: PHI | Stanley Cups: 2",
        "Team: Maple Leafs | Location: TOR | Stanley Cups: 13",
    ]


def test_semicolon_csv_and_two_row_headers():
    semicolon = tabular.parse(DOCS / "semicolon-delimited.csv", filename="s.csv")
    assert semicolon.metadata["delimiter"] == ";"
    assert "Lorem, ipsum: sed, do | dolor sit: eiusmod" in semicolon.sections[0].text
    spanned = tabular.parse(DOCS / "table-multi-row-column-cells-actual.csv", filename="t.csv")
    assert spanned.metadata["columns"][-2:] == ["Results Accuracy", "Results Time to complete"]
    assert "Disability Category: Blind | Participants: 5" in spanned.sections[0].text


def test_large_csv_is_split_into_row_groups_and_sections(tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("name,city\n" + "".join(f"person {i},city {i % 7}\n" for i in range(450)))
    doc = parse_file(path, "people.csv")
    assert doc.detected_type == "csv"
    assert [s.title for s in doc.sections] == [
        "people.csv (rows 1–200)",
        "people.csv (rows 201–400)",
        "people.csv (rows 401–450)",
    ]
    blocks = blocks_of(doc)
    assert all(b.text.startswith("name | city\n") and len(b.text.split("\n")) <= 21 for b in blocks)
    assert blocks[-1].text.endswith("name: person 449 | city: city 1")
    assert (blocks[-1].metadata["row_start"], blocks[-1].metadata["row_end"]) == (441, 450)


# --- WebVTT -----------------------------------------------------------------------------------------------


def test_vtt_cues_grouped_into_minute_windows():
    doc = vtt.parse(VTT / "videojs-elephantsdream/captions.en.vtt", filename="captions.en.vtt")
    first, second = doc.sections[:2]
    assert (first.title, first.start_time, first.end_time) == ("00:00:00–00:01:00", 0.0, 60.0)
    assert second.section_path == ["captions.en", "00:01:00–00:02:00"]
    cue = first.blocks[0]
    assert (cue.kind, cue.text, cue.start_time, cue.end_time) == ("cue", "At the left we can see...", 15.0, 17.951)
    assert first.blocks[3].text == "Everything is safe.\nPerfectly safe."
    assert all(60 <= b.start_time < 120 for b in second.blocks)


def test_vtt_short_timestamps_and_chinese():
    short = vtt.parse(VTT / "videojs-elephantsdream/example-captions.vtt", filename="example.vtt")
    assert short.sections[0].blocks[0].start_time == 0.7
    assert short.sections[0].blocks[-1].end_time == 45.611
    chinese = vtt.parse(VTT / "xgplayer-zh/textTrack-1.vtt", filename="zh.vtt")
    assert chinese.sections[0].blocks[0].text == "这是外挂字幕"
    assert chinese.metadata["duration"] == 90.0


def test_vtt_chapters_become_sections_and_notes_are_skipped():
    doc = vtt.parse(VTT / "videojs-elephantsdream/chapters.en.vtt", filename="chapters.en.vtt")
    assert doc.metadata["kind"] == "chapters"
    assert [s.title for s in doc.sections[:3]] == ["Prologue", "Switchboard trap", "Telephone/Lecture"]
    assert (doc.sections[1].start_time, doc.sections[1].end_time) == (27.5, 70.0)
    assert "Owen Edwards" not in " ".join(s.text for s in doc.sections)


def test_vtt_voice_tags_give_the_speaker(tmp_path):
    path = tmp_path / "talk.vtt"
    path.write_text(
        "WEBVTT\n\nSTYLE\n::cue { color: red }\n\nintro\n00:00:01.000 --> 00:00:04.000\n"
        "<v Roger Bingham>We are in New York City</v>\n\n"
        "00:01:02.500 --> 00:01:05.000\n<v.loud Neil deGrasse Tyson><i>Yes</i> &amp; no</v>\n"
    )
    doc = vtt.parse(path, filename="talk.vtt")
    cues = blocks_of(doc)
    assert [(c.speaker, c.text) for c in cues] == [
        ("Roger Bingham", "We are in New York City"),
        ("Neil deGrasse Tyson", "Yes & no"),
    ]
    assert cues[0].metadata["cue_id"] == "intro"
    assert [s.title for s in doc.sections] == ["00:00:00–00:01:00", "00:01:00–00:02:00"]


def test_vtt_without_cues_is_refused(tmp_path):
    path = tmp_path / "none.vtt"
    path.write_text("WEBVTT\n\nNOTE nothing here\n")
    with pytest.raises(ParseError, match="no cues"):
        vtt.parse(path, filename="none.vtt")
