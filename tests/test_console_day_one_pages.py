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


@pytest.mark.usefixtures("lite_vector_settings", "warm_embedding_cache")
def test_a_transcript_facts_original_link_opens_the_transcript_at_its_own_cue(world, alice,
                                                                               django_capture_on_commit_callbacks):
    import html
    import re

    from ingest.tasks import run_inline
    from memory.models import Document
    from tests.conftest import SHARED_DATA, api_client

    captions = SHARED_DATA / "docs" / "vtt" / "videojs-elephantsdream" / "captions.en.vtt"
    with captions.open("rb") as fh, django_capture_on_commit_callbacks(execute=False):
        api_client(world.alice_key).post("/api/v1/documents", {"kb": "docs", "files": [fh]}, format="multipart")
    assert run_inline(Document.objects.get(filename=captions.name).pk).status == "ready"

    page = alice.get("/search/", {"q": "the machine is like clockwork", "method": "hybrid"}).content.decode()
    fact = next(card for card in page.split('<li class="result card')[1:]
                if 'data-kind="fact"' in card and "clockwork" in card)
    link = html.unescape(re.search(r'<a href="([^"]+)" class="original-link"', fact).group(1))
    assert "t=271.126" in link, link
    viewer = alice.get(link).content.decode()
    # "Emo. the machine is like clockwork." is cue 27 (00:04:31), inside a chunk of the cues of 00:04:27–00:04:51.
    cited = re.findall(r'<tr id="cue-(\d+)" class="cited"', viewer)
    assert cited == ["27"], cited
