"""Document extraction on real files: key-value lines, tables, reference lists (issue 16)."""

from ingest.extraction.base import ExtractionUnit, Passage
from ingest.extraction.deterministic import DeterministicExtractor
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
