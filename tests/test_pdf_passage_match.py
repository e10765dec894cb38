"""Which spans of a PDF page's text layer the viewer marks as the cited passage (static/loci/passage_match.mjs),
run in Node as the browser runs it."""

import json
import shutil
import subprocess

import pytest

from pathlib import Path

MODULE = Path(__file__).resolve().parents[1] / "static" / "loci" / "passage_match.mjs"


def marked(spans: list[str], passage: str) -> list[str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed")
    script = (f"import {{ passageSpans }} from {json.dumps(MODULE.as_uri())};\n"
              f"const spans = {json.dumps(spans)};\n"
              f"console.log(JSON.stringify(passageSpans(spans, {json.dumps(passage)})));")
    done = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [span for span, hit in zip(spans, json.loads(done.stdout)) if hit]


def test_a_chinese_name_printed_with_spaces_between_its_characters_is_marked():
    """Issue 39: pdf.js gives 戴 薇 one span per character; each alone was too short to be marked."""
    spans = ["第三季度会议纪要", "参会人：", "戴", "薇", "、", "王", "磊", "负责预算审核。", "附录", "甲"]
    passage = "参会人：戴薇、王磊负责预算审核。"
    assert marked(spans, passage) == ["参会人：", "戴", "薇", "、", "王", "磊", "负责预算审核。"]


def test_english_spans_of_the_passage_are_marked_and_a_stray_common_word_is_not():
    spans = ["The", "budget", "meeting", "was", "short.", "We", "used", "3 trucks", "for the", "move.", "the"]
    passage = "We used 3 trucks for the move."
    assert marked(spans, passage) == ["We", "used", "3 trucks", "for the", "move."]
