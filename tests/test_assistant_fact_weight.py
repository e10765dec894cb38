"""MRAG_ASSISTANT_FACT_WEIGHT: facts said in an AI assistant's reply weigh less against the user's own."""

from datetime import datetime, timedelta, timezone

import pytest

from tests.conftest import api_client

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")

T0 = datetime(2023, 5, 18, 18, 0, tzinfo=timezone.utc)
CHAT = [("user", "I ran 5 km on the treadmill at the gym tonight."),
        ("assistant", "Running 5 km on a treadmill burns about 300 calories at a steady pace on the gym treadmill.")]


@pytest.fixture
def alice(world, committed):
    client = api_client(world.alice_key)
    body = {"user_id": "u1", "session_id": "s1", "messages": [
        {"message_id": f"m{i}", "sender_id": role, "sender_name": role, "role": role, "content": text,
         "timestamp": (T0 + timedelta(seconds=30 * i)).isoformat()} for i, (role, text) in enumerate(CHAT)]}
    assert committed(client.post, "/api/v1/memories", body, format="json").status_code == 200
    assert committed(client.post, "/api/v1/memories/flush", {"user_id": "u1", "session_id": "s1"},
                     format="json").status_code == 200
    return client


def said_in(alice) -> list[str]:
    body = alice.post("/api/v1/memories/search", {"query": "5 km on the treadmill at the gym: calories",
                                                  "filters": {"user_id": "u1"}, "top_k": 5}, format="json").json()
    return [f["sources"][0]["message_id"] for f in sorted(body["facts"], key=lambda f: -f["score"])]


def test_a_lower_weight_puts_the_users_statement_before_the_assistants(alice, settings):
    assert said_in(alice)[0] == "m1"  # the reply's sentence matches the question best
    settings.MRAG_ASSISTANT_FACT_WEIGHT = 0.2
    ranked = said_in(alice)
    assert ranked[0] == "m0" and "m1" in ranked  # weighed down, not dropped
