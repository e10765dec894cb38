"""Search under concurrency: many searches at once always finish, and a dead engine is an error, not a hang."""

import os
import signal
import threading
import time

import pytest
from django.db import transaction

from ingest.actions import ingest_document
from ingest.tasks import run_inline
from retrieval.request import parse_search_request
from retrieval.search import search
from tenants.access import permitted_scope

NOTES = [
    "The Aurora Station research base sits on the southern ice shelf and is run by a consortium of universities.",
    "Tourist visits to Aurora Station ended in March 2017, after a storm wrecked the pier.",
    "Researchers still winter over at the station every year to measure how fast the ice moves.",
    "极光站位于南部冰架上，由多所大学组成的联盟共同管理。",
]


@pytest.fixture
def indexed(transactional_db, world, tmp_path):
    scope = permitted_scope(world.alice, write=True)
    path = tmp_path / "Aurora Station.txt"
    path.write_text("\n\n".join(NOTES), encoding="utf-8")
    with open(path, "rb") as fh, transaction.atomic():
        upload = ingest_document(scope, world.docs, fh, path.name)
    assert run_inline(upload.document.pk).status == "ready"
    return scope


def _search_in_threads(scope, bodies, wait: float):
    """Run one search per body, each in its own thread (as ASGI runs sync views); (results, errors, unfinished)."""
    results, errors = [], []

    def one(body):
        try:
            results.append(search(scope, parse_search_request(body)))
        except Exception as exc:  # noqa: BLE001 - the test reports every failure
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(body,), daemon=True) for body in bodies]
    for t in threads:
        t.start()
    deadline = time.monotonic() + wait
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return results, errors, sum(t.is_alive() for t in threads)


def _ids(response) -> tuple:
    return tuple(str(it["id"]) for key in ("facts", "episodes", "chunks") for it in response[key])


@pytest.mark.usefixtures("lite_vector_settings")
def test_32_concurrent_hybrid_searches_with_chunks_all_finish(indexed):
    bodies = [{"query": q, "method": "hybrid", "memory_types": ["episode", "atomic_fact", "chunk"], "top_k": 5}
              for q in ("When did tourist visits end?", "极光站由谁管理？", "winter over ice", "storm pier") * 8]
    alone = {b["query"]: _ids(search(indexed, parse_search_request(b))) for b in bodies[:4]}  # one at a time
    assert all(alone.values())
    results, errors, unfinished = _search_in_threads(indexed, bodies, wait=120)
    assert unfinished == 0, f"{unfinished} of 32 searches never finished"
    assert not errors, errors[:3]
    # and each answered what the same search answers alone
    assert sorted(_ids(r) for r in results) == sorted(alone[b["query"]] for b in bodies)
    # and the process still searches afterwards
    assert search(indexed, parse_search_request({"query": "storm pier"}))["facts"]


def _milvus_binary_pid(db_path) -> int:
    """The pid of the Milvus Lite binary serving `db_path` (the process that answers searches)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if len(argv) > 1 and argv[0].endswith(b"/milvus") and argv[1] == str(db_path).encode():
                return int(entry)
    raise LookupError(f"no Milvus Lite binary serves {db_path}")


@pytest.fixture
def own_lite_server(settings, tmp_path):
    """A Milvus Lite server of this test's own, so stopping it cannot disturb other tests."""
    from retrieval.backends import reset_backends
    from retrieval.milvus_lite import ensure_server, stop_server
    from tests.index_fixtures import free_port

    path = (tmp_path / "milvus.db").resolve()
    uri = ensure_server(path, free_port())
    settings.LOCI_VECTOR_INDEX = {"BACKEND": "retrieval.backends.milvus.MilvusVectorIndex",
                                  "OPTIONS": {"uri": uri, "collection_prefix": "stopped", "index_type": "IVF_FLAT"}}
    yield path
    os.kill(_milvus_binary_pid(path), signal.SIGCONT)
    reset_backends()
    stop_server(path)  # its collections go with its own file


def test_a_vector_index_that_stops_answering_is_a_504_naming_it_within_the_deadline(own_lite_server, world,
                                                                                   settings, tmp_path):
    from tests.conftest import api_client

    scope = permitted_scope(world.alice, write=True)
    path = tmp_path / "Aurora Station.txt"
    path.write_text("\n\n".join(NOTES), encoding="utf-8")
    with open(path, "rb") as fh, transaction.atomic():
        upload = ingest_document(scope, world.docs, fh, path.name)
    assert run_inline(upload.document.pk).status == "ready"
    client = api_client(world.alice_key)
    body = {"query": "When did tourist visits end?", "method": "hybrid"}
    assert client.post("/api/v1/memories/search", body, format="json").status_code == 200

    settings.SEARCH_ENGINE_TIMEOUT_SECONDS = 2.0
    os.kill(_milvus_binary_pid(own_lite_server), signal.SIGSTOP)  # alive, holding its port, answering nothing
    for method in ("hybrid", "vector"):
        started = time.monotonic()
        response = client.post("/api/v1/memories/search", {**body, "method": method}, format="json")
        took = time.monotonic() - started
        assert response.status_code == 504, response.content
        assert response.json()["engine"] == "vector" and "vector index" in response.json()["error"]
        assert took < 2.0 + 2.0, took  # its deadline, plus the rest of the request
    # the other engine is a separate bulkhead: keyword search still answers
    keyword = client.post("/api/v1/memories/search", {**body, "method": "keyword"}, format="json")
    assert keyword.status_code == 200 and keyword.json()["episodes"]
