"""Agentic search with a model (tests/fake_openai.py's local server; the indexes and hybrid are real):
its deadline, and its merge and worker threads."""

import json
import time

import jsonschema
import pytest

from tests.conftest import api_client
from tests.fake_openai import chat_reply, fake_openai  # noqa: F401  (fixture)
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


def test_the_sufficiency_check_sends_its_schema_and_uses_a_verdict_that_follows_it(alice, fake_openai):
    from retrieval.search.agentic import VERDICT_SCHEMA

    reply = {"is_sufficient": False, "reasoning": "no dates", "missing_information": ["when"],
             "queries": ["painting class"]}
    jsonschema.validate(reply, VERDICT_SCHEMA)
    fake_openai.queue_json(reply)

    found = search(alice, "support group", method="agentic")
    assert found["query"]["answered_by"] == "agentic" and found["query"]["notes"] == []
    (request,) = fake_openai.bodies("chat")
    assert request["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "sufficiency", "schema": VERDICT_SCHEMA, "strict": False}}


BAD_VERDICTS = {
    # Each field goes into the response as it is: a list where the reasoning belongs is no verdict.
    "wrong_types": json.dumps({"is_sufficient": False, "reasoning": ["more"], "missing_information": "dates",
                               "queries": ["painting"]}),
    "insufficient_without_queries": json.dumps({"is_sufficient": False, "reasoning": "more",
                                                "missing_information": ["x"], "queries": [" "]}),
    "truncated": '{"is_sufficient": false, "reasoning": "the memories say nothing about wh',
}


@pytest.mark.parametrize("bad", BAD_VERDICTS)
def test_a_malformed_verdict_answers_with_hybrid_and_says_so(alice, fake_openai, bad):
    attempts = 3  # LLM_MAX_RETRIES 2 (tests/fake_openai.py): every attempt gets the same reply
    fake_openai.queue("chat", *[chat_reply(BAD_VERDICTS[bad], "length" if bad == "truncated" else "stop")
                                for _ in range(attempts)])

    found = search(alice, "support group", method="agentic")
    assert found["query"]["answered_by"] == "hybrid" and "agentic" not in found
    assert found["facts"] and any("sufficiency check failed" in note for note in found["query"]["notes"])
    requests = fake_openai.bodies("chat")
    assert len(requests) == attempts  # asked again with its mistake each time, then hybrid answered
    assert all(r["response_format"]["type"] == "json_schema" for r in requests)
