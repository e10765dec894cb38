"""The rules that keep a document moving, in one process against the real database and indexes:
claims and their leases, the sweeper, errors that say whether retrying helps, rerun of a stalled
document. (tests/test_stalled_documents.py proves the same with real worker processes.)"""

import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from ingest import pipeline
from ingest.actions import ingest_document
from ingest.sweeper import start_sweeper, stop_sweeper, sweep
from ingest.tasks import process_document_stage, run_inline, stage_outcome
from memory.models import ClaimLost, Document, DocumentGone
from tenants.access import permitted_scope
from tests.conftest import DOCS, api_client
from tests.index_fixtures import free_port


@pytest.fixture
def sent(monkeypatch):
    """The stage messages the sweeper publishes (the edge of the process), instead of sending them."""
    messages = []
    monkeypatch.setattr(process_document_stage, "delay", lambda *args: messages.append(args))
    return messages


def upload(world, path, kb=None):
    scope = permitted_scope(world.alice, write=True)
    with open(path, "rb") as fh:
        return ingest_document(scope, kb or world.docs, fh, path.name).document


def moved(document, seconds_ago, **fields):
    Document.objects.filter(pk=document.pk).update(updated_at=timezone.now() - timedelta(seconds=seconds_ago),
                                                   **fields)
    document.refresh_from_db()
    return document


def test_a_stage_that_lost_its_claim_writes_nothing(world, settings):
    settings.LOCI_STAGE_LEASE_SECONDS = 60
    document = upload(world, DOCS / "LICENSE.md")
    stale_holder = Document.objects.get(pk=document.pk)
    assert stale_holder.claim(Document.Status.QUEUED, Document.Status.PARSING, "parse", 60)
    moved(document, 61)  # its heartbeat stopped: the lease ran out
    new_holder = Document.objects.select_related("kb").get(pk=document.pk)
    assert new_holder.claim(Document.Status.QUEUED, Document.Status.PARSING, "parse", 60)
    pipeline.parse_and_chunk(new_holder)
    chunks = sorted(new_holder.chunks.values_list("pk", flat=True))

    with pytest.raises(ClaimLost):
        pipeline.parse_and_chunk(stale_holder)  # would replace the new holder's chunks
    with pytest.raises(ClaimLost):
        stale_holder.mark_failed("a late failure")
    assert sorted(Document.objects.get(pk=document.pk).chunks.values_list("pk", flat=True)) == chunks
    assert Document.objects.get(pk=document.pk).status == Document.Status.PARSING


def test_a_document_deleted_under_a_claim_stops_its_stage_quietly(world):
    """Deleted mid-stage: the claim's writes find no row; ready/failed mark nothing, no DatabaseError."""
    document = upload(world, DOCS / "LICENSE.md")
    holder = Document.objects.select_related("kb").get(pk=document.pk)
    assert holder.claim(Document.Status.QUEUED, Document.Status.PARSING, "parse", 60)
    Document.objects.filter(pk=document.pk).delete()

    assert holder.mark_ready() is False and holder.mark_failed("too late") is False
    with pytest.raises(DocumentGone):
        pipeline.parse_and_chunk(holder)
    with pytest.raises(DocumentGone):
        holder.release_claim()
    assert stage_outcome(document.pk, "parse") == "not claimed"


def test_the_sweeper_queues_an_expired_stage_again_once(world, settings, sent):
    settings.LOCI_STAGE_LEASE_SECONDS, settings.LOCI_STALLED_QUEUE_SECONDS = 60, 600
    dead = upload(world, DOCS / "LICENSE.md")
    moved(dead, 61, status=Document.Status.INDEXING, claim_token="00000000-0000-0000-0000-000000000001",
          progress=95)
    alive = moved(upload(world, DOCS / "README.md"), 20, status=Document.Status.PARSING,
                  claim_token="00000000-0000-0000-0000-000000000002")

    assert sweep()["lease expired"] == [dead.pk]
    assert sweep()["lease expired"] == []  # released once, by one sweeper
    dead.refresh_from_db()
    # Back to what the extract stage left behind, under no claim; the bar keeps its place.
    assert (dead.status, dead.claim_token, dead.progress) == ("extracting", None, 95)
    assert sent == [(dead.pk, "index")]
    alive.refresh_from_db()
    assert alive.status == "parsing" and str(alive.claim_token).endswith("2")


def test_the_sweeper_sends_a_waiting_documents_message_again_when_it_may_be_lost(world, settings, sent):
    settings.LOCI_STAGE_LEASE_SECONDS, settings.LOCI_STALLED_QUEUE_SECONDS = 60, 600
    lost = moved(upload(world, DOCS / "LICENSE.md"), 601)  # queued ten minutes ago, never picked up
    between = moved(upload(world, DOCS / "README.md"), 601, status=Document.Status.PARSING)  # parsed, no claim
    recent = moved(upload(world, DOCS / "codeblock.md"), 30)

    assert sorted(sweep()["message lost"]) == sorted([lost.pk, between.pk])
    assert sorted(sent) == sorted([(lost.pk, "parse"), (between.pk, "extract")])
    assert sweep()["message lost"] == []  # not again before another period has passed
    recent.refresh_from_db()
    assert recent.status == "queued"


def test_the_sweeper_thread_stops_when_told_and_may_start_again(db):
    first = start_sweeper(interval=3600)
    assert first.is_alive() and start_sweeper(interval=3600) is first  # one per process
    assert stop_sweeper(timeout=10) and not first.is_alive()  # a worker's shutdown ends it, not the exit
    second = start_sweeper(interval=3600)
    assert second is not first and second.is_alive()
    assert stop_sweeper(timeout=10) and not second.is_alive()


@pytest.mark.usefixtures("lite_vector_settings")
def test_a_permanent_failure_says_retrying_cannot_help_and_the_console_offers_no_retry(world):
    broken = upload(world, DOCS / "empty.txt")
    run_inline(broken.pk)
    broken.refresh_from_db()
    assert broken.status == "failed" and broken.retryable is False, broken.error

    body = api_client(world.alice_key).get(f"/api/v1/documents/{broken.pk}").json()
    assert (body["status"], body["retryable"]) == ("failed", False)
    console = Client()
    console.force_login(world.alice)
    page = console.get(f"/documents/{broken.pk}/").content.decode()
    assert "Processing failed." in page and ">Retry</button>" not in page
    assert ">Re-run</button>" not in page  # the header's button would fail the same way

    Document.objects.filter(pk=broken.pk).update(retryable=True)  # e.g. an engine that did not answer
    page = console.get(f"/documents/{broken.pk}/").content.decode()
    assert ">Retry</button>" in page and ">Re-run</button>" in page


@pytest.mark.django_db(transaction=True)
def test_an_engine_that_does_not_answer_is_retried_then_named_in_the_reason(world, settings, sent):
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.LOCI_VECTOR_INDEX = {"BACKEND": "retrieval.backends.milvus.MilvusVectorIndex",
                                  "OPTIONS": {"uri": closed, "timeout": 1, "collection_prefix": "stall"}}
    settings.LOCI_ENGINE_RETRY_SECONDS = 3
    from retrieval.backends import reset_backends

    reset_backends()
    try:
        document = upload(world, DOCS / "README.md")
        for stage in ("parse", "extract"):
            assert stage_outcome(document.pk, stage) == "finished"
        assert stage_outcome(document.pk, "index") == "stopped"
    finally:
        reset_backends()
    document.refresh_from_db()
    assert document.status == "failed" and document.retryable is True
    assert document.error.startswith(f"The vector index (Milvus at {closed}) did not answer for "), document.error


def test_rerun_accepts_a_stalled_document_and_refuses_a_moving_one(world, settings, sent):
    settings.LOCI_STAGE_LEASE_SECONDS = 60
    stalled = moved(upload(world, DOCS / "LICENSE.md"), 3600, status=Document.Status.INDEXING, progress=95,
                    claim_token="00000000-0000-0000-0000-000000000003")
    moving = moved(upload(world, DOCS / "README.md"), 5, status=Document.Status.INDEXING,
                   claim_token="00000000-0000-0000-0000-000000000004")
    client = api_client(world.alice_key)

    response = client.post(f"/api/v1/documents/{stalled.pk}/rerun")
    assert response.status_code == 202, response.content
    stalled.refresh_from_db()
    assert (stalled.status, stalled.progress, stalled.claim_token) == ("queued", 0, None)

    response = client.post(f"/api/v1/documents/{moving.pk}/rerun")
    assert response.status_code == 400 and "indexing" in str(response.json()), response.json()


@pytest.mark.django_db(transaction=True)  # the heartbeat renews from a thread of its own, on its own connection
def test_a_stage_that_ends_does_not_report_its_own_release_as_a_lost_claim(world, settings, monkeypatch, caplog):
    """The heartbeat stops before the claim is handed on. It used to beat once more after the
    release and warn "lost its claim" for a stage that finished well (seen in CI under load)."""
    settings.LOCI_STAGE_LEASE_SECONDS = 0.6  # a beat every 0.2 s
    document = upload(world, DOCS / "LICENSE.md")
    release = Document.release_claim

    def slow_release(self):  # a loaded machine: the worker's next statement comes late
        release(self)
        time.sleep(0.5)

    monkeypatch.setattr(Document, "release_claim", slow_release)
    assert stage_outcome(document.pk, "parse") == "finished"
    assert "lost its claim" not in caplog.text
