"""GET /api/v1/memories lists every kind a search returns: profile and foresight items too (issue 29)."""

import pytest

from tests.conftest import api_client

pytestmark = pytest.mark.usefixtures("api_schema_check")


@pytest.fixture
def kinds(world):
    from memory.models import Memory

    for kind, text in (("episode", "Alice talked about her move."), ("atomic_fact", "Alice moved to Lyon."),
                       ("profile", "Alice lives in Lyon."), ("foresight", "Alice will start a new job in May.")):
        Memory.objects.create(tenant=world.acme, kb=world.docs, kind=kind, text=text, user_id="u1", session_id="s1")
    return world


@pytest.mark.parametrize("kind, text", [("profile", "Alice lives in Lyon."),
                                        ("foresight", "Alice will start a new job in May.")])
def test_profile_and_foresight_items_are_listed_by_kind(kinds, kind, text):
    response = api_client(kinds.acme_ro_key).get("/api/v1/memories", {"memory_type": kind, "user_id": "u1"})
    assert response.status_code == 200, response.json()
    assert [(m["memory_type"], m["text"]) for m in response.json()["results"]] == [(kind, text)]


def test_without_a_kind_the_list_holds_episodes_and_facts(kinds):
    listed = api_client(kinds.acme_ro_key).get("/api/v1/memories").json()["results"]
    assert sorted(m["memory_type"] for m in listed) == ["atomic_fact", "episode"]


def test_an_unknown_kind_names_every_listable_one(kinds):
    response = api_client(kinds.acme_ro_key).get("/api/v1/memories", {"memory_type": "chunk"})
    assert response.status_code == 400
    assert "episode, atomic_fact, profile, foresight" in response.json()["error"]
