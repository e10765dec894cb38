"""The `paths` method (issue 28): episodes reached by their facts, the entities they name and the
neighbouring session of the same user, scored by their best path."""

import pytest

from tests.conftest import api_client
from tests.test_conversation_updates import alice  # noqa: F401  (fixture: two sessions, EN and ZH)

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")


def paths(client, query, user="u1", **extra):
    response = client.post("/api/v1/memories/search", {"query": query, "method": "paths", "filters": {"user_id": user},
                                                       **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_question_spanning_two_sessions_gets_the_episodes_of_both(alice):  # noqa: F811
    body = paths(alice, "Did Alex walk Mochi before starting at Fabrikam?")
    assert body["query"]["answered_by"] == "paths"
    sessions = {e["session_id"] for e in body["episodes"]}
    assert sessions == {"s1", "s2"}
    facts = [f["atomic_fact"] for e in body["episodes"] for f in e["atomic_facts"]]
    assert any("Fabrikam" in f for f in facts) and any("Mochi" in f for f in facts)
    assert all("path_cost" in e["scores"] for e in body["episodes"])
    ranks = sorted(e["rank"] for e in body["episodes"])
    assert ranks == list(range(1, len(ranks) + 1))


def test_another_user_and_another_tenant_see_none_of_it(world, alice):  # noqa: F811
    assert paths(alice, "Where does Alex work?", user="someone-else")["episodes"] == []
    assert paths(api_client(world.charlie_key), "Where does Alex work?")["episodes"] == []
