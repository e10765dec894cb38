"""A search's reference time: "last Thursday" searched as the day it names, as the facts of that day state it."""

from datetime import datetime, timedelta, timezone

import pytest

from tests.conftest import api_client

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")

THURSDAY = datetime(2023, 5, 18, 18, 0, tzinfo=timezone.utc)  # a Thursday
# Two evenings at the gym a week apart, told alike: only the day tells them apart.
RUNS = {"s1": (THURSDAY - timedelta(days=7), "I ran 5 km on the treadmill at the gym tonight."),
        "s2": (THURSDAY, "I ran 8 km on the treadmill at the gym tonight.")}


@pytest.fixture
def alice(world, committed):
    client = api_client(world.alice_key)
    for session, (when, text) in RUNS.items():
        body = {"user_id": "u1", "session_id": session, "messages": [
            {"message_id": f"{session}-1", "sender_id": "user", "sender_name": "user", "role": "user",
             "content": text, "timestamp": when.isoformat()},
            {"message_id": f"{session}-2", "sender_id": "assistant", "sender_name": "assistant", "role": "assistant",
             "content": "Great job, keep it up!", "timestamp": (when + timedelta(seconds=30)).isoformat()}]}
        assert committed(client.post, "/api/v1/memories", body, format="json").status_code == 200
        flushed = committed(client.post, "/api/v1/memories/flush", {"user_id": "u1", "session_id": session},
                            format="json")
        assert flushed.status_code == 200, flushed.content
    return client


def search(client, **body):
    response = client.post("/api/v1/memories/search", {"filters": {"user_id": "u1"}, "top_k": 5, **body},
                           format="json")
    assert response.status_code == 200, response.content
    return response.json()


def first_message(body) -> str:
    items = body["facts"] + [f for e in body["episodes"] for f in e["atomic_facts"]] + body["episodes"]
    best = max(items, key=lambda item: item["score"])
    return next(s["message_id"] for s in best["sources"] if s["type"] == "message")


def test_last_thursday_finds_what_was_said_that_thursday(alice):
    asked = "How far did I run on the treadmill last Thursday?"
    body = search(alice, query=asked, method="keyword", reference_time="2023-05-22T09:00:00Z")  # the Monday after
    assert body["query"]["text"] == asked
    assert body["query"]["searched_as"] == "How far did I run on the treadmill last Thursday (18 May 2023)?"
    assert first_message(body) == "s2-1"
    # A week later the same words name the other run.
    later = search(alice, query=asked, method="keyword", reference_time="2023-05-15")
    assert first_message(later) == "s1-1"


def test_hybrid_searches_the_resolved_query_too(alice, settings):
    # Hybrid's BM25 weight is small and two near-identical facts differ in cosine by a hair, so only
    # the query it searched is checked here; bench.longmemeval --dated measures what it changes.
    # Not the floor: with the late-interaction stage on (the default since session 10) these terse
    # one-line answers score 0.010, at the 0.01 floor (hybrid alone: 0.03); bench/RESULTS.md,
    # "Late interaction from hybrid's own runners-up", records it as the map's known weak spot.
    settings.MRAG_MIN_RELEVANCE = 0.0
    body = search(alice, query="How far did I run last Thursday?", method="hybrid", reference_time="2023-05-22")
    assert body["query"]["searched_as"] == "How far did I run last Thursday (18 May 2023)?"
    assert first_message(body) in {"s1-1", "s2-1"}


def test_without_a_reference_time_the_query_is_searched_as_written(alice):
    body = search(alice, query="How far did I run last Thursday?", method="keyword")
    assert "searched_as" not in body["query"]


@pytest.mark.parametrize("bad", ["last Thursday", "2023-13-01", 20230522, "x" * 50])
def test_a_reference_time_that_is_no_date_is_a_400_with_the_reason(alice, bad):
    response = alice.post("/api/v1/memories/search", {"query": "run", "reference_time": bad}, format="json")
    assert response.status_code == 400
    assert "reference_time" in response.content.decode()
