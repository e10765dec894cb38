"""PDF parsing of real files: heading paths, pages, tables, protected and damaged PDFs (OCR is in test_parsing_ocr)."""

import pytest

from ingest.parsing import pdf
from ingest.parsing.base import ParseError
from tests.conftest import DOCS

FR_OLAP = DOCS / "language-docs" / "fr_olap.pdf"


def parse(path):
    return pdf.parse(path, filename=path.name)


def test_it_builds_heading_paths_from_font_sizes_with_pages():
    parsed = parse(FR_OLAP)

    assert parsed.detected_type == "pdf"
    assert parsed.page_count == 12
    assert parsed.metadata["headings_from"] == "fonts"
    starts = {tuple(section.section_path): section.page for section in parsed.sections}
    assert starts[("1 Introduction",)] == 1
    assert starts[("3 Le langage QSL", "3.1 Définitions préliminaires")] == 3
    assert starts[("4 Mesure de qualité d’un résumé", "4.2 Définitions et propriétés")] == 5
    assert starts[("Références",)] == 11
    blocks = [block for section in parsed.sections for block in section.blocks]
    assert all(1 <= block.page <= 12 for block in blocks)
    assert all(section.page >= 1 for section in parsed.sections)
    # A section's blocks never start before the section does.
    assert all(section.blocks[0].page == section.page for section in parsed.sections)
    # Running heads repeated on every other page are dropped, the title they copy is kept as a heading.
    running_heads = ("J. Aligon et al.", "Résumés et interrogations de logs de requêtes OLAP")
    assert not any(block.text in running_heads for block in blocks)
    assert parsed.sections[0].title == "Résumés et interrogations de logs de requêtes OLAP"


def test_it_takes_headings_from_the_outline_when_it_names_lines_on_the_page():
    # DA-1p.pdf keeps the 1,372-entry outline of the book it was cut from; only three entries are on the page.
    parsed = parse(DOCS / "pdf" / "DA-1p.pdf")

    assert parsed.metadata["headings_from"] == "outline"
    assert [section.section_path for section in parsed.sections] == [
        ["MAIN GAME", "CREATURES", "Abomination"],
        ["MAIN GAME", "CREATURES", "Arcane Horror"],
    ]
    assert "tracking the maleficar" in parsed.sections[0].text


def test_it_renders_ruled_tables_as_rows_without_repeating_their_text():
    parsed = parse(DOCS / "pdf" / "korean-text-with-tables.pdf")

    tables = [block for section in parsed.sections for block in section.blocks if block.kind == "table"]
    assert parsed.metadata["tables"] == 2
    assert [table.text.splitlines()[0] for table in tables] == ["업종 | 적립 대상", "업종 | 적립 대상"]
    assert "주유 | 모든 주유소" in tables[0].text.splitlines()
    assert all(table.page == 1 for table in tables)
    paragraphs = " ".join(b.text for s in parsed.sections for b in s.blocks if b.kind != "table")
    assert "모든 주유소" not in paragraphs
    # Korean keeps its spaces when wrapped lines are joined (unlike Chinese).
    assert "일시불 및 할부 이용금액" in paragraphs


def test_ruled_layout_boxes_are_not_tables_and_bullets_become_list_items():
    parsed = parse(DOCS / "pdf" / "list-item-example.pdf")

    assert parsed.metadata["tables"] == 0
    assert ["Module Two: Initial Planning and Step 1: Concept Development"] in [s.section_path for s in parsed.sections]
    lists = [block.text.splitlines() for s in parsed.sections for block in s.blocks if block.kind == "list"]
    # The bullet glyph sits on a line of its own in this PDF; the item's wrapped lines are joined after it.
    assert ["● What are product types?", "● What challenges may arise in development?"] == lists[0][:2]


def test_a_copy_protected_pdf_that_opens_without_a_password_parses():
    parsed = parse(DOCS / "pdf" / "copy-protected.pdf")

    assert parsed.page_count == 2
    title = "LayoutParser: A Unified Toolkit for Deep Learning Based Document Image Analysis"
    assert parsed.sections[0].section_path == [title]  # ligature "ﬁ" expanded, two lines joined
    assert [title, "1 Introduction"] in [section.section_path for section in parsed.sections]


def test_a_password_protected_pdf_is_refused_with_a_readable_reason():
    with pytest.raises(ParseError, match=r"^The PDF is password-protected\.$"):
        parse(DOCS / "pdf" / "password.pdf")


@pytest.mark.parametrize("keep", [0.5, 0.05])
def test_a_truncated_pdf_is_refused(tmp_path, keep):
    data = FR_OLAP.read_bytes()
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes(data[: int(len(data) * keep)])

    with pytest.raises(ParseError, match=r"^The PDF is damaged or truncated: "):
        parse(truncated)


@pytest.mark.parametrize("content", [b"", b"%PDF-1.7\n", b"not a pdf at all" * 100])
def test_garbage_is_refused_with_parse_error(tmp_path, content):
    path = tmp_path / "bad.pdf"
    path.write_bytes(content)

    with pytest.raises(ParseError):
        parse(path)
