"""Office parsing: docx/doc, xlsx/xls, pptx/ppt on real files, and LibreOffice conversion failures."""

from concurrent.futures import ThreadPoolExecutor

import docx
import pptx
import pytest
from pptx.util import Inches

from ingest.parsing import docx as docx_parser
from ingest.parsing import office
from ingest.parsing import pptx as pptx_parser
from ingest.parsing import xlsx as xlsx_parser
from ingest.parsing.base import ParseError, TransientParseError
from tests.conftest import DOCS


def texts(section):
    return [(block.kind, block.text) for block in section.blocks]


# --- Word ---------------------------------------------------------------------------------------


def test_docx_headings_paragraphs_lists_and_tables_keep_body_order(tmp_path):
    document = docx.Document()
    document.add_paragraph("Field guide", style="Title")
    document.add_paragraph("Printed for the spring survey.")
    document.add_heading("Birds", level=1)
    document.add_paragraph("Birds are counted at dawn.")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "Species", "Count"
    for n in range(25):
        row = table.add_row()
        row.cells[0].text, row.cells[1].text = f"Species {n}", str(n)
    document.add_heading("Waders", level=2)
    document.add_paragraph("Curlew", style="List Bullet")
    document.add_paragraph("Godwit", style="List Bullet 2")
    document.add_heading("Mammals", level=1)
    document.add_paragraph("Bats are counted at dusk.")
    path = tmp_path / "guide.docx"
    document.save(path)

    parsed = docx_parser.parse(path, filename="guide.docx")

    assert parsed.detected_type == "docx"
    assert [s.section_path for s in parsed.sections] == [
        ["Field guide"],
        ["Field guide", "Birds"],
        ["Field guide", "Birds", "Waders"],
        ["Field guide", "Mammals"],
    ]
    birds = parsed.sections[1]
    assert [kind for kind, _ in texts(birds)] == ["paragraph", "table", "table"]
    first, second = birds.blocks[1].text.splitlines(), birds.blocks[2].text.splitlines()
    # 25 rows become groups of 20 and 5, each led by the header row.
    assert (first[0], first[1], len(first)) == ("Species | Count", "Species 0 | 0", 21)
    assert (second[0], second[1], len(second)) == ("Species | Count", "Species 20 | 20", 6)
    assert texts(parsed.sections[2]) == [("list", "- Curlew\n  - Godwit")]
    assert texts(parsed.sections[3]) == [("paragraph", "Bats are counted at dusk.")]


def test_docx_merged_and_nested_table_cells_are_readable():
    parsed = docx_parser.parse(DOCS / "docx-tables.docx", filename="docx-tables.docx")

    tables = [text for kind, text in texts(parsed.sections[0]) if kind == "table"]
    assert tables[0] == "Header Col 1 | Header Col 2\nLorem ipsum | A link example"
    assert "e f g&t h" in tables[1]  # the table nested inside a cell
    assert tables[2].splitlines()[0] == "a | b"  # a cell spanning two columns appears once


def test_docx_headers_and_footers_go_to_metadata_not_the_body():
    parsed = docx_parser.parse(DOCS / "docx-hdrftr.docx", filename="docx-hdrftr.docx")

    assert parsed.metadata["headers"] == ["First header para", "Last header para"]
    assert parsed.metadata["footers"] == ["para1", "para2"]
    assert [block.text for s in parsed.sections for block in s.blocks] == ["Main document"]


def test_docx_numbered_paragraphs_are_nested_lists():
    parsed = docx_parser.parse(DOCS / "example-list-items-multiple.docx", filename="lists.docx")

    lists = [text for kind, text in texts(parsed.sections[0]) if kind == "list"]
    assert "  - The quick brown fox jumps over the lazy dog." in lists[1].splitlines()


def test_a_corrupt_docx_is_refused(tmp_path):
    path = tmp_path / "broken.docx"
    path.write_bytes((DOCS / "fake.docx").read_bytes()[:5000])

    with pytest.raises(ParseError, match="damaged"):
        docx_parser.parse(path, filename="broken.docx")


def test_a_doc_is_converted_by_libreoffice():
    # An OLE .doc that also holds a zipped theme: sniffing it as a zip would send it to python-docx.
    path = DOCS / "fake-doc-emphasized-text.doc"

    parsed = docx_parser.parse_doc(path, filename=path.name)

    assert parsed.detected_type == "doc"
    assert texts(parsed.sections[0]) == [
        ("table", "Header Col 1 | Header Col 2\nA bold italic bold-italic example | A Link example"),
        ("paragraph", "I am a bold italic bold-italic text."),
        ("paragraph", "I am a normal text."),
    ]


def test_a_doc_that_is_not_ole_is_refused_without_libreoffice(tmp_path):
    path = tmp_path / "notes.doc"
    path.write_text("just text")

    with pytest.raises(ParseError, match="not a legacy .doc"):
        docx_parser.parse_doc(path, filename="notes.doc")


# --- LibreOffice ------------------------------------------------------------------------------


def test_parallel_conversions_each_get_their_output():
    # With a shared profile the second soffice hands its job to the first and one output goes missing.
    def convert(name):
        with office.converted(DOCS / name, "docx", filename=name) as converted:
            return docx_parser.parse(converted, filename=name).sections[0].text

    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(convert, ["fake.doc", "duplicate-paragraphs.doc"])

    assert first == "Lorem ipsum dolor sit amet."
    assert second.startswith("some text")


def test_a_conversion_without_output_is_a_readable_parse_error():
    with pytest.raises(ParseError, match=r"^LibreOffice could not convert the file \(.+\)\.$"):
        with office.converted(DOCS / "fake.doc", "nosuchformat", filename="fake.doc"):
            pass


def test_a_conversion_past_its_timeout_is_transient():
    with pytest.raises(TransientParseError, match=r"within 0\.3 s"):
        with office.converted(DOCS / "fake.doc", "docx", filename="fake.doc", timeout=0.3):
            pass


# --- Spreadsheets -------------------------------------------------------------------------------


def test_xlsx_has_a_section_per_sheet_and_the_header_in_every_row_group():
    parsed = xlsx_parser.parse(DOCS / "stanley-cups.xlsx", filename="stanley-cups.xlsx")

    assert parsed.detected_type == "xlsx"
    assert [(s.title, s.sheet, s.section_path) for s in parsed.sections] == [
        ("Stanley Cups", "Stanley Cups", ["Stanley Cups"]),
        ("Stanley Cups Since 67", "Stanley Cups Since 67", ["Stanley Cups Since 67"]),
    ]
    # The one-cell title row is a caption; the header is the first row as wide as the data.
    assert texts(parsed.sections[0]) == [
        ("paragraph", "Stanley Cups"),
        (
            "table",
            "Team | Location | Stanley Cups\n"
            "Team: Blues | Location: STL | Stanley Cups: 1\n"
            "Team: Flyers | Location: PHI | Stanley Cups: 2\n"
            "Team: Maple Leafs | Location: TOR | Stanley Cups: 13",
        ),
    ]


def test_a_big_sheet_is_split_into_groups_of_twenty_rows():
    parsed = xlsx_parser.parse(DOCS / "more-than-1k-cells.xlsx", filename="big.xlsx")

    blocks = parsed.sections[0].blocks
    assert [block.metadata["rows"] for block in blocks] == [[2, 21], [22, 40]]
    assert all(block.text.splitlines()[0].startswith("x | x | x") for block in blocks)
    assert [len(block.text.splitlines()) for block in blocks] == [21, 20]


def test_xls_is_read_with_xlrd():
    parsed = xlsx_parser.parse_xls(DOCS / "tests-example.xls", filename="tests-example.xls")

    assert parsed.detected_type == "xls"
    assert [s.sheet for s in parsed.sections] == ["Example Test", "Format Abbr.", "Readme"]
    abbreviations = parsed.sections[1].text
    assert "Abbreviation | Question Type" in abbreviations
    assert "Abbreviation: MC | Question Type: Multiple Choice" in abbreviations


@pytest.mark.parametrize("parse", [xlsx_parser.parse, xlsx_parser.parse_xls])
def test_a_damaged_spreadsheet_is_refused(tmp_path, parse):
    path = tmp_path / "broken.xls"
    path.write_bytes(b"\x00garbage" * 200)

    with pytest.raises(ParseError, match="damaged"):
        parse(path, filename="broken.xls")


# --- Presentations ------------------------------------------------------------------------------


def test_pptx_has_a_section_per_slide_with_tables():
    parsed = pptx_parser.parse(DOCS / "sample-presentation.pptx", filename="sample.pptx")

    assert parsed.page_count == 4
    assert [(s.slide, s.title) for s in parsed.sections] == [
        (1, "Title Slide"),
        (2, "This is the first content slide"),
        (3, "This is the second content slide"),
        (4, "This is kinda backwards, huh?"),
    ]
    assert texts(parsed.sections[3]) == [("table", "Table | A | B | C\n1 | A1 | B1 | C1\n2 | A2 | B2 | C2")]
    assert "  With a sub-bullet" in parsed.sections[1].text.splitlines()


def test_pptx_speaker_notes_and_grouped_shapes_are_kept(tmp_path):
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])  # title only
    slide.shapes.title.text = "Roadmap"
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(2), Inches(3), Inches(1)).text_frame.text = "Q1: search"
    group.shapes.add_textbox(Inches(5), Inches(2), Inches(3), Inches(1)).text_frame.text = "Q2: memory"
    slide.notes_slide.notes_text_frame.text = "Mention the hiring plan."
    untitled = presentation.slides.add_slide(presentation.slide_layouts[6])  # blank
    untitled.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame.text = "Thanks"
    path = tmp_path / "deck.pptx"
    presentation.save(path)

    parsed = pptx_parser.parse(path, filename="deck.pptx")

    assert [(s.slide, s.title, s.section_path) for s in parsed.sections] == [
        (1, "Roadmap", ["Roadmap"]),
        (2, "Slide 2", ["Slide 2"]),
    ]
    assert texts(parsed.sections[0]) == [
        ("paragraph", "Q1: search"),
        ("paragraph", "Q2: memory"),
        ("notes", "Mention the hiring plan."),
    ]


def test_a_ppt_is_converted_by_libreoffice():
    parsed = pptx_parser.parse_ppt(DOCS / "fake-power-point.ppt", filename="fake-power-point.ppt")

    assert parsed.detected_type == "ppt"
    assert [s.title for s in parsed.sections] == ["Adding a Bullet Slide"]
    assert "Here is some text in a text box!" in parsed.sections[0].text


def test_a_ppt_that_is_really_pptx_is_read_directly_with_its_notes():
    parsed = pptx_parser.parse_ppt(DOCS / "language-docs" / "eng_spa_mult.ppt", filename="eng_spa_mult.ppt")

    assert parsed.detected_type == "pptx"
    assert texts(parsed.sections[0]) == [("notes", "This is a slide note.")]
    # LibreOffice writes body placeholders as a bare <p:ph/>, which is not a title.
    assert parsed.sections[1].title == "Slide 2"


@pytest.mark.parametrize("parse", [docx_parser.parse, pptx_parser.parse])
def test_garbage_office_files_are_refused(tmp_path, parse):
    path = tmp_path / "garbage"
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 300)

    with pytest.raises(ParseError):
        parse(path, filename="garbage")
