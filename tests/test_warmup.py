"""A process loads its embedding model as it starts, so its first search does not pay for the load
inside the engine deadline; /healthz says when the process is still warming."""

import threading
import time

import numpy as np
import pytest

from memory.models import Memory
from retrieval import warmup
from retrieval.projection import index_memories
from retrieval.request import parse_search_request
from retrieval.search import search
from tenants.access import permitted_scope
from tests.index_fixtures import hash_vector

LOAD_SECONDS = 1.5


class SlowToLoadEmbedder:
    """A model whose first call takes LOAD_SECONDS (the load), then answers at once."""

    thread_safe = True
    dim = 64
    name = "slow-to-load-64"
    loaded = threading.Event()
    loading = threading.Lock()

    def __init__(self, options):
        pass

    def _load(self):
        with self.loading:
            if not self.loaded.is_set():
                time.sleep(LOAD_SECONDS)
                self.loaded.set()

    def embed_documents(self, texts):
        return np.asarray([hash_vector(t) for t in texts], dtype=np.float32).reshape(len(texts), self.dim)

    def embed_query(self, text):
        self._load()
        return np.asarray(hash_vector(text), dtype=np.float32)


@pytest.fixture
def cold_process(settings, monkeypatch, world):
    settings.LOCI_EMBEDDERS = {"default": {"BACKEND": "tests.test_warmup.SlowToLoadEmbedder"}}
    settings.SEARCH_ENGINE_TIMEOUT_SECONDS = 0.5  # well under the load
    settings.MRAG_MIN_RELEVANCE = 0.0
    monkeypatch.setenv("LOCI_WARM_START", "1")
    SlowToLoadEmbedder.loaded.clear()
    warmup._state.clear()  # this test process starts as a new one would
    index_memories([Memory.objects.create(tenant=world.acme, kb=world.docs, kind=Memory.Kind.ATOMIC_FACT,
                                          text="Caroline adopted a grey cat called Pepper", content_hash="f1")])
    yield
    SlowToLoadEmbedder.loaded.wait(5)  # the warm-up thread is done before the settings go back
    warmup._state.clear()


def vector_search(world):
    scope = permitted_scope(world.alice, write=True)
    return search(scope, parse_search_request({"query": "grey cat Pepper", "method": "vector", "top_k": 5}))


def test_the_first_search_of_a_starting_process_waits_for_the_model_outside_its_deadline(cold_process, world, client):
    warmup.start()
    body = client.get("/healthz").json()
    assert body["warmup"]["status"] == "warming"
    response = vector_search(world)  # 0.5 s deadline, 1.5 s load: answered all the same
    found = [item.get("text") or item.get("summary") for item in response["facts"] + response["episodes"]]
    assert found == ["Caroline adopted a grey cat called Pepper"]
    assert client.get("/healthz").json()["warmup"]["status"] == "ready"


def test_a_process_that_never_warmed_warms_at_its_first_search(cold_process, world):
    """A script or shell calling search() directly: the load is still kept out of the deadline."""
    response = vector_search(world)
    assert [item["summary"] for item in response["episodes"]] == ["Caroline adopted a grey cat called Pepper"]
    assert warmup.state()["status"] == "ready"


def test_with_the_warm_start_off_the_load_falls_inside_the_deadline(cold_process, world, monkeypatch):
    """What the warm start avoids (and what every process did before it)."""
    from retrieval.search import EngineError

    monkeypatch.setenv("LOCI_WARM_START", "0")
    with pytest.raises(EngineError, match="the embedding model did not answer"):
        vector_search(world)


def test_loci_warm_start_0_turns_it_off(cold_process, monkeypatch):
    monkeypatch.setenv("LOCI_WARM_START", "0")
    warmup.start()
    assert warmup.state() is None
    SlowToLoadEmbedder.loaded.set()



def test_the_warm_up_loads_the_late_interaction_model_when_the_stage_is_on(db, settings, monkeypatch):
    """ColBERT's load (about 1 CPU-s: the files' sha256 and two sessions) belongs to the process's
    start, not to the first English search's CPU budget (SEARCH_CPU_BUDGET_SECONDS)."""
    from retrieval.runtimes import colbert

    settings.SEARCH_LATE_INTERACTION = True
    monkeypatch.setenv("LOCI_WARM_START", "1")
    monkeypatch.setattr(colbert, "_models", {})
    warmup._state.clear()
    try:
        warmup.start()
        warmup.wait()
        assert warmup.state()["status"] == "ready"
        assert colbert._models, "the first search would load ColBERT inside its budget"
    finally:
        warmup._state.clear()
