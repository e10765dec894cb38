"""The learned entity typer (issue 35): its numpy runtime reproduces the torch network it was trained
as, its weights are the ones its card names, and it types a dev mention the rules mistype — the rules'
type being one of its features, not the decision.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from entities import extraction
from entities.extraction import find_mentions
from entities.typing_model import MODEL_PATH, feature_ids, features, model
from retrieval.runtimes.onnx_graph import file_sha256

REFERENCE = json.loads((Path(__file__).parent / "data" / "entity_types_reference.json").read_text())


def test_the_weights_are_the_ones_the_reference_and_the_card_name():
    sha = file_sha256(MODEL_PATH)
    assert REFERENCE["weights_sha256"] == sha
    assert sha in MODEL_PATH.with_suffix(".md").read_text()


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=lambda c: c["surface"])
def test_numpy_reproduces_torch_features_and_logits(case):
    spans = {(s.start, s.end): s for s in extraction.mention_spans(case["text"])}
    span = spans[(case["start"], case["end"])]  # the rules find the same mention, with the same type and flag
    assert (span.found.surface, span.found.type, span.flag) == (case["surface"], case["rule_type"], case["flag"])
    ids = feature_ids(features(case["text"], span.start, span.end, span.found.type, span.flag, extraction.name_lists()), model().buckets)
    assert ids.tolist() == case["feature_ids"]
    np.testing.assert_allclose(model().logits(ids[None])[0], case["logits"], atol=2e-3)


def types(text: str, typer: str) -> dict[str, str]:
    default = extraction.TYPER
    extraction.TYPER = typer
    try:
        return {m.surface: m.type for m in find_mentions(text) if m.type not in ("date", "amount")}
    finally:
        extraction.TYPER = default


def test_a_title_the_rules_leave_untyped_is_a_work_to_the_model():
    # bench/entities_gold.json, part "dev" (LoCoMo conversation 3): no cue the rules know ("called").
    text = "The game was called Counter-Strike: Global Offensive, and me and my team had a blast to the very end!"
    assert types(text, "rules")["Counter-Strike"] == ""
    assert types(text, "model")["Counter-Strike"] == "work"


def test_the_model_keeps_what_the_rules_get_right():
    found = types("I live in Boston with my dog Mochi and work at Fabrikam.", "model")
    assert found["Boston"] == "place" and found["Fabrikam"] == "organization"
    assert types("我下个月要去西雅图看比赛。", "model")["西雅图"] == "place"
