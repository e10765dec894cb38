"""Every kind of memory in one order (issue 27, item 6): facts, episodes, foresight, agent cases and
skills and profile items share one calibrated relevance, so each top-level item of a search has a
`rank` across all of them, the floor applies to all, and the console and `manage.py search` show the
one list. Through the REST API on real indexes (SQLite FTS5 and the embedded vector index)."""

from datetime import datetime, timedelta, timezone
from io import StringIO

import pytest
from django.core.management import call_command

from tests.conftest import api_client
from tests.test_agent_cases import CODING, transcript

pytestmark = pytest.mark.usefixtures("api_schema_check")

T0 = datetime(2024, 6, 3, 10, 0, tzinfo=timezone.utc)
LISTS = ("facts", "episodes", "chunks", "agent_memory", "profiles")
QUERY = "Where does Jon live, what will he do next week, and how were the date parser tests fixed?"


@pytest.fixture
def alice(world, committed):
    client = api_client(world.alice_key)
    turns = [("Jon", "I live in Boston with my wife and our dog."),
             ("Gina", "Nice! Any plans?"),
             ("Jon", "Next week I will fly to Denver for a conference on parsers.")]
    messages = [{"message_id": f"j{i}", "role": "user", "sender_name": who, "content": text,
                 "timestamp": (T0 + timedelta(minutes=i)).isoformat()} for i, (who, text) in enumerate(turns)]
    assert committed(client.post, "/api/v1/memories", {"user_id": "u1", "session_id": "chat", "messages": messages},
                     format="json").status_code == 200
    assert committed(client.post, "/api/v1/memories/flush", {"user_id": "u1", "session_id": "chat"},
                     format="json").status_code == 200
    transcript(client, committed, "ci", CODING, start=T0 + timedelta(hours=1))
    return client


def ranked(body):
    return sorted((item for key in LISTS for item in body.get(key, [])), key=lambda item: item["rank"])


def test_profiles_foresight_cases_facts_and_episodes_share_one_rank(alice):
    response = alice.post("/api/v1/memories/search", {
        "query": QUERY, "memory_types": ["episode", "atomic_fact", "foresight", "agent_case"],
        "filters": {"user_id": "u1", "agent_id": "*"}}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    items = ranked(body)
    assert [item["rank"] for item in items] == list(range(1, len(items) + 1))
    assert [item["score"] for item in items] == sorted((item["score"] for item in items), reverse=True)
    assert all(item["score"] >= body["query"]["min_relevance"] for item in items)
    # Each kind is there, and numbered in the same order as the others (not appended after them).
    assert body["profiles"] and all("rank" in p for p in body["profiles"])
    assert body["agent_memory"] and body["agent_memory"][0]["memory_type"] == "agent_case"
    assert any(f.get("memory_type") == "foresight" for f in body["facts"])
    assert any("Boston" in p["text"] for p in body["profiles"])


def test_the_console_and_manage_py_search_show_cases_and_profiles_in_the_one_list(world, alice):
    console = api_client(user=world.alice)
    page = console.get("/search/", {"q": QUERY, "agent_id": "dev-bot"}).content.decode()
    assert 'data-kind="case"' in page and 'data-kind="profile"' in page
    out = StringIO()
    call_command("search", QUERY, "--tenant", "acme", stdout=out)
    lines = out.getvalue().splitlines()
    assert any(" profile " in line and "Boston" in line for line in lines), lines
