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


def _document(world, name, status, *, size=100, retryable=True, days_ago=0):
    import datetime

    from django.utils import timezone

    from memory.models import Document

    document = Document.objects.create(kb=world.docs, filename=name, sha256=name.ljust(64, "0")[:64], size=size,
                                       status=status, retryable=retryable)
    Document.objects.filter(pk=document.pk).update(created_at=timezone.now() - datetime.timedelta(days=days_ago))
    return document


def test_the_documents_table_sorts_by_name_and_size_both_ways(world, alice):
    import re

    for name, size, days in (("b.txt", 300, 2), ("a.txt", 100, 1), ("c.txt", 200, 3)):
        _document(world, name, "ready", size=size, days_ago=days)

    def order(sort=None):
        page = alice.get("/documents/", {"sort": sort} if sort else {}).content.decode()
        return re.findall(r'<td class="cell-name"><a href="[^"]+">([^<]+)</a>', page)

    assert order() == ["a.txt", "b.txt", "c.txt"]  # newest first
    assert order("filename") == ["a.txt", "b.txt", "c.txt"] and order("-filename") == ["c.txt", "b.txt", "a.txt"]
    assert order("-size") == ["b.txt", "c.txt", "a.txt"]
    assert order("'; drop table") == order()  # an unknown sort is the default, not an error
    page = alice.get("/documents/", {"sort": "filename"}).content.decode()
    assert 'aria-sort="ascending"' in page and "sort=-filename" in page  # the header sorts the other way next


def test_ticked_documents_are_rerun_or_deleted_together(world, alice, django_capture_on_commit_callbacks):
    from memory.models import Document

    failed = _document(world, "failed.txt", "failed")
    empty = _document(world, "empty.txt", "failed", retryable=False)
    ready = _document(world, "ready.txt", "ready")
    other = _document(world, "keep.txt", "ready")
    foreign = Document.objects.create(kb=world.secret, filename="globex.txt", sha256="9" * 64, status="ready")

    with django_capture_on_commit_callbacks(execute=False):  # no worker: the re-run documents stay queued
        answer = alice.post("/documents/bulk/", {"action": "rerun", "ids": [failed.pk, empty.pk, ready.pk]},
                            follow=True)
    assert "Queued 2 documents again. 1 skipped" in answer.content.decode()
    statuses = dict(Document.objects.values_list("filename", "status"))
    assert (statuses["failed.txt"], statuses["ready.txt"], statuses["empty.txt"]) == ("queued", "queued", "failed")

    ids = [ready.pk, empty.pk, foreign.pk]
    confirm = alice.post("/documents/bulk/", {"action": "delete", "ids": ids}).content.decode()
    assert "Delete 2 documents?" in confirm and "globex.txt" not in confirm  # another tenant's id is ignored
    assert Document.objects.filter(pk__in=ids).count() == 3  # nothing deleted before the confirmation
    done = alice.post("/documents/bulk/", {"action": "delete", "confirm": "yes", "ids": ids}, follow=True)
    assert "Deleted 2 documents" in done.content.decode()
    assert set(Document.objects.values_list("filename", flat=True)) == {"failed.txt", "keep.txt", "globex.txt"}

    bob = Client()
    bob.force_login(world.bob)  # a viewer
    assert bob.post("/documents/bulk/", {"action": "delete", "confirm": "yes", "ids": [other.pk]}).status_code == 403
    assert "data-bulk" not in bob.get("/documents/").content.decode()


def test_bootstrap_applies_a_new_password_only_when_asked_and_otherwise_says_it_was_not(world):
    import io

    from django.core.management import call_command

    def bootstrap(*extra):
        out = io.StringIO()
        call_command("bootstrap", "--tenant", "acme", "--kb", "docs", "--user", "alice", *extra, stdout=out)
        return out.getvalue()

    said = bootstrap("--password", "another-pw-1")
    assert "NOT its password (not applied" in said and "Sign in as" not in said
    world.alice.refresh_from_db()
    assert world.alice.check_password("alice-pw-123")

    said = bootstrap("--password", "another-pw-1", "--set-password")
    world.alice.refresh_from_db()
    assert world.alice.check_password("another-pw-1") and "Sign in as alice / another-pw-1" in said
    assert "NOT" not in bootstrap("--password", "another-pw-1")  # the right one: nothing to warn about
