"""Document extraction on real files: key-value lines, tables, reference lists (issue 16)."""

import re

from ingest.chunking import chunk_document
from extraction.base import ExtractionUnit, Passage
from extraction.deterministic import DeterministicExtractor
from ingest.parsing.dispatch import parse_file
from tests.conftest import DOCS


def facts_of(path, **_) -> list[str]:
    """Every fact the deterministic extractor keeps, one unit per parsed section, a passage per block."""
    out = []
    for section in parse_file(path, path.name).sections:
        passages = [Passage(f"block-{i}", b.text) for i, b in enumerate(section.blocks) if b.text.strip()]
        out += [f.text for f in DeterministicExtractor().extract(ExtractionUnit(" › ".join(section.section_path),
                                                                                 passages)).facts]
    return out


def test_it_keeps_email_header_lines_as_facts():
    facts = facts_of(DOCS / "fake-email.eml")
    assert "From: Matthew Robinson <mrobinson@unstructured.io>" in facts
    assert "Subject: Test Email" in facts


def test_it_keeps_short_key_value_and_amount_lines_as_facts():
    # The lines of issue 16's colophon and annual report (those files are not in shared/data).
    lines = ["本片由中国新闻社制作。", "监制人：刘泽彭", "英文翻译：戴薇", "BY NET PROFIT ₹67,845 crore",
             "3.1 Operating segments", "目录"]
    unit = ExtractionUnit("", [Passage(f"p{i}", line) for i, line in enumerate(lines)])
    facts = [f.text for f in DeterministicExtractor().extract(unit).facts]
    assert facts == ["本片由中国新闻社制作。", "监制人：刘泽彭", "英文翻译：戴薇", "BY NET PROFIT ₹67,845 crore"]


def test_it_writes_csv_and_tsv_rows_as_header_value_pairs_once():
    for name in ("stanley-cups.tsv", "stanley-cups.csv"):
        facts = facts_of(DOCS / name)
        assert facts == ["stanley-cups: Team: Blues | Location: STL | Stanley Cups: 1",
                         "stanley-cups: Team: Flyers | Location: PHI | Stanley Cups: 2",
                         "stanley-cups: Team: Maple Leafs | Location: TOR | Stanley Cups: 13"]


def test_it_reads_a_two_column_label_table_as_one_pair_per_row():
    facts = facts_of(DOCS / "example-steelJIS-datasheet.html")
    assert any(f.endswith(": Classification: Structural steel Chromium molybdenum steel") for f in facts)
    assert not any("Grade :: " in f for f in facts)


def test_it_keeps_each_table_block_of_a_sheet_with_its_own_caption_and_header():
    # Sheet 1 holds January–June 2023 and, below a blank row, the same columns for 2022.
    facts = facts_of(DOCS / "2023-half-year-analyses-by-segment.xlsx")
    zone_na = [f for f in facts if "Column A: Zone NA | Sales (a):" in f]
    assert any(f.startswith("In millions of CHF January–June 2022: ") and "Sales (a): 12138" in f for f in zone_na)
    assert not any("Sales (a): Sales (a)" in f for f in facts)  # the repeated header is no row
    assert not any("Column A: (a) Inter-segment" in f for f in facts)  # footnotes are notes, not rows


def test_it_keeps_licence_boilerplate_and_reference_lines_out_of_facts():
    facts = facts_of(DOCS / "winter-sports.epub")
    licence = [f for f in facts if "gutenberg" in f.lower()]
    assert any("Benson" in f or "Switzerland" in f for f in facts)  # the book itself still yields facts
    assert len(licence) <= 5, licence  # 64 before: the licence was read as the book
    # Lines of a Wikipedia bibliography (issue 16: norwich-city.txt, not in shared/data).
    unit = ExtractionUnit("Norwich City › Bibliography", [Passage("p0", "Eastwood, John; Davage, Mike (1986). "
                                                                   "Canary Citizens. Almeida Books. ISBN 0-7117-2020-7.")])
    assert DeterministicExtractor().extract(unit).facts == []
    unit = ExtractionUnit("Norwich City › History", [
        Passage("p0", "Norwich City were founded in 1902 at the Criterion Café."),
        Passage("p1", "Retrieved 23 June 2020."), Passage("p2", "ISBN 1-85291-662-1.")])
    assert [f.text for f in DeterministicExtractor().extract(unit).facts] == [
        "Norwich City were founded in 1902 at the Criterion Café."]


def test_a_table_sections_summary_names_its_columns_and_rows_not_one_rows_value():
    """Issue 16: an episode summary of a sheet stated one row's value (the Blues' cups) for the sheet,
    and was the first answer to a question about another row."""
    path = DOCS / "stanley-cups.xlsx"
    summaries = []
    for section in parse_file(path, path.name).sections:
        passages = [Passage(f"block-{i}", b.text) for i, b in enumerate(section.blocks) if b.text.strip()]
        summaries.append(DeterministicExtractor().extract(
            ExtractionUnit(" › ".join(section.section_path), passages)).summary)
    since_67 = next(s for s in summaries if s.startswith("Stanley Cups Since 67"))
    assert since_67 == "Stanley Cups Since 67: a table of 3 rows with the columns Team, Location, Stanley Cups."
    assert not any(re.search(r"Stanley Cups: \d", s) for s in summaries), summaries


def test_a_forms_caption_under_its_value_becomes_the_values_label():
    """A 10-K cover page prints each value above its caption: "(702) 939-3254" / "(Registrant's
    telephone number)". The caption alone was a fact, and the first answer for the telephone number."""
    path = DOCS / "example-10k-1p.html"
    facts = []
    for parent in chunk_document(parse_file(path, path.name)):  # one passage per child chunk, as ingested
        unit = ExtractionUnit(" › ".join(parent.section_path), [Passage(f"c{i}", c.text)
                                                               for i, c in enumerate(parent.children)])
        facts += [f.text for f in DeterministicExtractor().extract(unit).facts]
    assert "Registrant's telephone number: (702) 939-3254" in facts
    assert "IRS Employer Identification No.: 20-8143439" in facts
    assert "Exact name of small business issuer as specified in its charter: Galaxy Gaming, Inc." in facts
    assert not any(f.startswith("(") and f.endswith(")") for f in facts)
