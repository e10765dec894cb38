"""Cancelling a document, and the progress the console reports for it, against the real database.

A running stage stops at its next guarded write once the claim is gone; a queued document's message
finds nothing to claim; the status feed says where a waiting document is in line and what it waits for.
"""

import pytest
from django.test import Client

from ingest import pipeline
from ingest.actions import ingest_document
from ingest.tasks import stage_outcome
from memory.models import ClaimLost, Document
from tenants.access import permitted_scope
from tests.conftest import DOCS, api_client


def upload(world, path, kb=None):
    scope = permitted_scope(world.alice, write=True)
    with open(path, "rb") as fh:
        return ingest_document(scope, kb or world.docs, fh, path.name).document


def test_cancel_stops_a_running_stage_at_its_next_write_and_says_who(world):
    document = upload(world, DOCS / "LICENSE.md")
    holder = Document.objects.select_related("kb").get(pk=document.pk)
    assert holder.claim(Document.Status.QUEUED, Document.Status.PARSING, "parse", 60)

    response = api_client(user=world.alice).post(f"/api/v1/documents/{document.pk}/cancel")
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "failed" and response.json()["error"] == "Cancelled by alice"

    with pytest.raises(ClaimLost):
        pipeline.parse_and_chunk(holder)  # the running stage finds its claim gone and writes nothing
    document.refresh_from_db()
    assert (document.status, document.stage, document.chunk_count) == ("failed", "cancelled", 0)
    assert document.retryable  # it can be re-run
    # Cancelling again: nothing to cancel, a clear 400, not a 500.
    again = api_client(user=world.alice).post(f"/api/v1/documents/{document.pk}/cancel")
    assert again.status_code == 400 and "nothing to cancel" in str(again.json())


def test_a_cancelled_queued_document_is_never_processed_and_can_be_rerun(world):
    document = upload(world, DOCS / "LICENSE.md")
    assert api_client(world.alice_key).post(f"/api/v1/documents/{document.pk}/cancel").status_code == 202
    assert stage_outcome(document.pk, "parse") == "not claimed"  # its queued message arrives too late
    document.refresh_from_db()
    assert document.error.startswith("Cancelled by API key ")
    rerun = api_client(user=world.alice).post(f"/api/v1/documents/{document.pk}/rerun")
    assert rerun.status_code == 202 and rerun.json()["status"] == "queued"


def test_cancel_needs_write_access_and_the_same_tenant(world):
    document = upload(world, DOCS / "LICENSE.md")
    assert api_client(user=world.bob).post(f"/api/v1/documents/{document.pk}/cancel").status_code == 403
    assert api_client(world.charlie_key).post(f"/api/v1/documents/{document.pk}/cancel").status_code == 404
    assert Document.objects.get(pk=document.pk).status == "queued"


def test_the_console_cancel_button(world):
    document = upload(world, DOCS / "LICENSE.md")
    client = Client()
    client.force_login(world.alice)
    page = client.get(f"/documents/{document.pk}/").content.decode()
    assert "Cancel processing" in page
    client.post(f"/documents/{document.pk}/cancel/")
    page = client.get(f"/documents/{document.pk}/").content.decode()
    assert "Cancelled." in page and "Cancelled by alice" in page and "Cancel processing" not in page


def test_status_says_queued_with_its_place_in_line_not_a_stage_it_is_not_running(world):
    first, second = upload(world, DOCS / "LICENSE.md"), upload(world, DOCS / "fake.docx")
    other_kb = upload(world, DOCS / "pdf" / "fake-memo.pdf", kb=world.notes)
    # The first finished parsing and let go of its claim: it waits for a worker to extract it.
    holder = Document.objects.select_related("kb").get(pk=first.pk)
    assert holder.claim(Document.Status.QUEUED, Document.Status.PARSING, "parse", 60)
    pipeline.touch_started(holder)
    pipeline.parse_and_chunk(holder)
    holder.release_claim()

    client = Client()
    client.force_login(world.alice)
    feed = client.get(f"/documents/status.json?ids={first.pk},{second.pk},{other_kb.pk}").json()["documents"]
    by_id = {d["id"]: d for d in feed}
    assert by_id[first.pk]["phase"] == "queued" and by_id[first.pk]["waiting_for"] == "extracting"
    assert by_id[first.pk]["detected_type"] == "md" and by_id[first.pk]["started"]
    assert [by_id[d.pk]["queue_ahead"] for d in (first, second, other_kb)] == [0, 1, 2]
    assert by_id[second.pk]["phase"] == "queued" and by_id[second.pk]["took_seconds"] is None


def test_an_instant_failure_says_so_and_keeps_its_detected_type(world, tmp_path):
    """A password-protected file is still its type; a failure in the first stage took under a second."""
    encrypted = DOCS / "pdf" / "password.pdf"
    if not encrypted.exists():
        pytest.skip("no encrypted PDF fixture")
    document = upload(world, encrypted)
    assert stage_outcome(document.pk, "parse") == "stopped"
    client = Client()
    client.force_login(world.alice)
    status = client.get(f"/documents/status.json?ids={document.pk}").json()["documents"][0]
    assert status["phase"] == "failed" and status["retryable"] is False
    assert status["detected_type"] == "pdf"
    assert status["took_seconds"] < 5
    page = client.get(f"/documents/{document.pk}/").content.decode()
    assert "type not detected" not in page


def test_a_pdf_original_opens_inline_and_other_files_download(world):
    pdf, docx = upload(world, DOCS / "pdf" / "fake-memo.pdf"), upload(world, DOCS / "fake.docx")
    Document.objects.filter(pk=pdf.pk).update(detected_type="pdf")
    Document.objects.filter(pk=docx.pk).update(detected_type="docx")
    client = Client()
    client.force_login(world.alice)
    inline = client.get(f"/documents/{pdf.pk}/original/")
    assert inline["Content-Type"] == "application/pdf" and inline["Content-Disposition"].startswith("inline")
    assert "sandbox" in inline["Content-Security-Policy"]
    assert client.get(f"/documents/{pdf.pk}/original/?download=1")["Content-Disposition"].startswith("attachment")
    assert client.get(f"/documents/{docx.pk}/original/")["Content-Disposition"].startswith("attachment")


def test_reconcile_during_an_index_stage_and_after_a_cancel_reports_nothing_stale(world, lite_vector_settings,
                                                                                   django_capture_on_commit_callbacks):
    """Rows an index stage has written are not stale while it runs; a cancel takes them out of the indexes."""
    from ingest.tasks import run_stage
    from retrieval import projection

    document = upload(world, DOCS / "LICENSE.md")
    assert run_stage(document.pk, "parse") and run_stage(document.pk, "extract")
    holder = Document.objects.select_related("kb").get(pk=document.pk)
    assert holder.claim(Document.Status.EXTRACTING, Document.Status.INDEXING, "index", 60)
    assert projection.index_document_rows(holder) > 0  # the stage's batches are written; it is still running

    during = projection.reconcile(world.acme)
    assert (during["vector"]["stale"], during["keyword"]["stale"]) == (0, 0), during

    with django_capture_on_commit_callbacks(execute=True):
        assert api_client(world.alice_key).post(f"/api/v1/documents/{document.pk}/cancel").status_code == 202
    after = projection.reconcile(world.acme)
    for index in ("vector", "keyword"):
        assert (after[index]["missing"], after[index]["stale"]) == (0, 0), after
