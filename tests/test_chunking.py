from ingest.chunking import CHILD_MAX_TOKENS, HARD_MAX_TOKENS, chunk_document
from extraction.base import ExtractionUnit, Passage
from extraction.deterministic import DeterministicExtractor
from ingest.parsing.base import Block, ParsedDocument, Section
from ingest.parsing.dispatch import parse_file
from extraction.tokens import count_tokens
from tests.conftest import DOCS, SHARED_DATA


def test_small_paragraphs_are_packed_and_long_ones_split_at_sentences():
    sentence = "The committee approved the annual budget after a long debate about the reserve fund. "
    section = Section("Budget", ["Report", "Budget"], [Block("Short note."), Block("Another short one."),
                                                      Block(sentence * 60)])
    (parent,) = chunk_document(ParsedDocument("txt", [section]))
    texts = [c.text for c in parent.children]
    assert texts[0].startswith("Short note.\n\nAnother short one.")  # small blocks packed with the next
    assert len(parent.children) >= 3
    for child in parent.children:
        assert count_tokens(child.text) <= CHILD_MAX_TOKENS
        assert child.text.endswith("reserve fund.")  # never cut inside a sentence
    assert parent.section_path == ["Report", "Budget"]


def test_tables_split_by_rows_repeat_their_header():
    header = "Name | Team | Goals"
    rows = [f"Player {i} | Team {i % 7} | {i}" for i in range(400)]
    section = Section("Scores", ["Scores"], [Block("\n".join([header, *rows]), kind="table")])
    children = [c for p in chunk_document(ParsedDocument("csv", [section])) for c in p.children]
    assert len(children) > 2
    assert all(c.text.startswith(header + "\n") for c in children)
    assert sum(c.text.count("\n") for c in children) == len(rows)  # every row once


def test_a_huge_unpunctuated_cell_is_cut_into_windows():
    parsed = parse_file(DOCS / "csv-with-long-lines.csv", "csv-with-long-lines.csv")
    children = [c for p in chunk_document(parsed) for c in p.children]
    assert children and max(c.tokens for c in children) <= HARD_MAX_TOKENS


def test_transcript_cues_keep_their_time_range_and_speaker():
    vtt = next((SHARED_DATA / "docs" / "vtt" / "videojs-elephantsdream").glob("*.vtt"))
    parents = chunk_document(parse_file(vtt, vtt.name))
    children = [c for p in parents for c in p.children]
    assert all(c.start_time is not None and c.end_time >= c.start_time for c in children)
    assert all(p.start_time <= p.children[0].start_time for p in parents)


def test_a_tables_caption_line_stays_with_its_table():
    """Issue 16: "Hardness of grade SNB22-3" was a chunk of its own, the first result for the hardness,
    while the table holding it (293-375) came third."""
    path = DOCS / "example-steelJIS-datasheet.html"
    children = [c for p in chunk_document(parse_file(path, path.name)) for c in p.children]
    hardness = next(c for c in children if "Hardness of grade SNB22-3" in c.text)
    assert "293-375" in hardness.text and hardness.kind == "table"
    assert hardness.text.startswith("Hardness of grade SNB22-3\n")
    assert not any(c.text.strip() in ("Hardness of grade SNB22-3", "Chemical composition 成分 % of grade SNB22-3")
                   for c in children)
    # and its rows' facts say what the table is about
    facts = DeterministicExtractor().extract(ExtractionUnit("SNB22-3", [Passage("c", hardness.text)])).facts
    assert any(f.text.startswith("Hardness of grade SNB22-3: ") and "293-375" in f.text for f in facts)
