"""A dense call started while the query embeds is chained to the embedding (engines.start_after):
it answers with the embedding's result, and a failure or timeout of the embedding is reported as the
embedding model's, not as the vector index's."""

import threading
import time

import pytest

from retrieval.search.engines import EngineTimeout, EngineUnavailable, start, start_after, wait


def test_a_chained_call_gets_the_first_calls_result_and_runs_after_it():
    order = []

    def embed():
        time.sleep(0.2)
        order.append("embedded")
        return [1.0, 2.0]

    def search(vector, limit):
        order.append("searched")
        return [x * limit for x in vector]

    first = start("embedder", embed)
    chained = start_after(first, "vector", search, 3)
    assert order == []  # the request thread was not held up
    assert wait(chained) == [3.0, 6.0]
    assert order == ["embedded", "searched"]


def test_a_failed_embedding_is_reported_as_the_embedders_and_the_search_never_runs():
    ran = threading.Event()

    def embed():
        raise RuntimeError("model file is gone")

    first = start("embedder", embed)
    chained = start_after(first, "vector", lambda vector: ran.set())
    with pytest.raises(EngineUnavailable) as caught:
        wait(chained)
    assert caught.value.engine == "embedder" and "embedding model" in str(caught.value)
    time.sleep(0.1)
    assert not ran.is_set()


def test_a_search_that_fails_after_the_embedding_is_the_vector_indexs():
    def search(vector):
        raise ConnectionError("index went away")

    chained = start_after(start("embedder", lambda: [0.0]), "vector", search)
    with pytest.raises(EngineUnavailable) as caught:
        wait(chained)
    assert caught.value.engine == "vector" and "vector index" in str(caught.value)


def test_a_chained_search_past_its_deadline_is_a_timeout_naming_the_vector_index(settings):
    settings.SEARCH_ENGINE_TIMEOUT_SECONDS = 0.3
    release = threading.Event()
    chained = start_after(start("embedder", lambda: [0.0]), "vector", lambda vector: release.wait(5))
    started = time.monotonic()
    with pytest.raises(EngineTimeout) as caught:
        wait(chained)
    assert caught.value.engine == "vector" and time.monotonic() - started < 1.5
    release.set()  # the late answer is dropped quietly
