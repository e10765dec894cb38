"""Console pages a new team meets in its first week (issue 29), rendered by Django's test client."""

import pytest
from django.test import Client

from memory.models import Memory


@pytest.fixture
def alice(world):
    client = Client()
    client.force_login(world.alice)
    return client


def remember(world, kind, text, user_id, session_id, **extra):
    return Memory.objects.create(tenant=world.acme, kb=world.docs, kind=kind, text=text, user_id=user_id,
                                 session_id=session_id, **extra)


def test_the_memories_page_filters_by_user_and_session_and_lists_every_kind(world, alice):
    remember(world, "atomic_fact", "Ann moved to Lyon.", "ann", "s1")
    remember(world, "atomic_fact", "Ann adopted a cat.", "ann", "s2")
    remember(world, "atomic_fact", "Ben sold his bike.", "ben", "s1")
    remember(world, "profile", "Ann lives in Lyon.", "ann", "s1")
    remember(world, "foresight", "Ann will start a new job in May.", "ann", "s1")

    def texts(**params):
        page = alice.get("/memories/", {"kind": "atomic_fact", **params}).content.decode()
        return {t for t in ("Ann moved to Lyon.", "Ann adopted a cat.", "Ben sold his bike.") if t in page}

    assert texts() == {"Ann moved to Lyon.", "Ann adopted a cat.", "Ben sold his bike."}
    assert texts(user_id="ann") == {"Ann moved to Lyon.", "Ann adopted a cat."}
    assert texts(user_id="ann", session_id="s2") == {"Ann adopted a cat."}
    assert texts(session_id="s1") == {"Ann moved to Lyon.", "Ben sold his bike."}
    page = alice.get("/memories/", {"kind": "atomic_fact", "user_id": "ann"}).content.decode()
    assert 'href="/profiles/ann/"' in page  # from a user's memories to their profile
    assert "session_id=s2" in page and "data-session" in page  # each memory links to its own session

    assert "Ann lives in Lyon." in alice.get("/memories/", {"kind": "profile"}).content.decode()
    assert "Ann will start a new job in May." in alice.get("/memories/", {"kind": "foresight"}).content.decode()


def test_the_profile_page_shows_since_as_a_date_not_iso_text(world, alice):
    remember(world, "profile", "Ann lives in Lyon.", "ann", "s1", metadata={
        "subject": "ann", "category": "location", "value": "Lyon", "first_seen": "2024-05-01T09:30:00+00:00"})
    page = alice.get("/profiles/ann/").content.decode()
    assert ">2024-05-01 09:30</time>" in page
    assert ">2024-05-01T09:30:00+00:00<" not in page
