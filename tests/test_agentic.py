"""Agentic search with a model (tests/fake_openai.py's local server; the indexes and hybrid are real):
its deadline, and its merge and worker threads."""

import json
import time

import pytest

from tests.conftest import api_client
from tests.fake_openai import fake_openai  # noqa: F401  (fixture)
from tests.test_conversation_api import ingest, search


@pytest.fixture
def alice(transactional_db, world, settings, committed, fake_openai):
    """Alice's client, with the sample chat extracted by the rules (the model is for the search only).

    Committed rows (transactional_db): round 2 searches in threads of its own, each with its own
    database connection, which would wait on the test's open transaction."""
    client = api_client(world.alice_key)
    settings.LLM_ENABLED = False
    ingest(client, committed)
    settings.LLM_ENABLED = True
    return client


def test_a_hung_sufficiency_check_answers_with_hybrid_by_the_deadline(alice, fake_openai, settings):
    settings.LLM_TIMEOUT = 5.0
    settings.LLM_SEARCH_DEADLINE_SECONDS = 1.0
    fake_openai.queue_delay("chat", 30.0, times=5)

    started = time.monotonic()
    found = search(alice, "support group", method="agentic")
    assert time.monotonic() - started < 4.0  # 1 s for the model, the rest is hybrid
    assert found["query"]["answered_by"] == "hybrid"
    assert found["facts"] and any("sufficiency check failed" in note for note in found["query"]["notes"])


def verdict(*queries: str) -> str:
    return json.dumps({"is_sufficient": False, "reasoning": "more", "missing_information": ["x"],
                       "queries": list(queries)})


def agentic_run(world, query: str):
    from retrieval.request import SearchRequest
    from retrieval.search import Run
    from tenants.access import Scope

    scope = Scope(world.acme, frozenset({world.docs.pk}), True, True, "test")
    return Run.start(scope, SearchRequest(query=query, method="agentic"))


def scores(response: dict) -> dict:
    return {(key, str(item["id"])): item["score"] for key in ("facts", "episodes") for item in response[key]}


def test_the_merge_compares_hybrid_scores_not_the_rerankers(alice, world, fake_openai):
    from retrieval.search.agentic import agentic_search

    run = agentic_run(world, "support group")
    hybrid = scores(run.hybrid())
    assert hybrid
    # A reranker on another scale than hybrid's 0-1: round 1's items must not enter the merge with it.
    fake_openai.queue_rerank([50.0] * len(hybrid))
    fake_openai.queue_chat(verdict("support group"))  # round 2 searches the same query: the same items

    merged, notes = agentic_search(run)
    assert notes == [] and merged["agentic"]["round"] == 2
    assert scores(merged) == {k: v for k, v in hybrid.items() if k in scores(merged)}
    assert scores(merged)


def test_round_twos_threads_close_their_database_connections(alice, world, fake_openai):
    import threading

    from django.db.backends.signals import connection_created

    from retrieval.search.agentic import agentic_search

    opened, closed = [], []

    def seen(sender, connection, **kwargs):
        if threading.current_thread() is threading.main_thread():
            return
        opened.append(connection)
        # Observed rather than read from connection.connection: the test database is an in-memory
        # SQLite, whose wrapper ignores close() so as not to lose the database.
        real_close = connection.close
        connection.close = lambda: (closed.append(connection), real_close())

    fake_openai.queue_chat(verdict("support group", "painting"))
    connection_created.connect(seen)
    try:
        merged, _ = agentic_search(agentic_run(world, "support group"))
    finally:
        connection_created.disconnect(seen)
    assert merged["agentic"]["round"] == 2
    assert opened, "round 2's searches ran in threads of their own, each with its own connection"
    assert {id(c) for c in opened} <= {id(c) for c in closed}  # closed by the thread, not left to the collector
