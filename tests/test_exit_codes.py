"""Management commands a script can trust: a non-zero exit whenever the work did not get done."""

import pytest
from django.core.management import CommandError, call_command

from memory.models import Document


def test_ingest_wait_fails_when_a_document_failed(world, tmp_path, capsys):
    good = tmp_path / "notes.txt"
    good.write_text("The harbour master logs the tide every morning at six.\n" * 5)
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"%PDF-1.4\n%%EOF\n")  # a PDF with nothing in it: the parser refuses it
    with pytest.raises(CommandError, match=r"1 of 2 document\(s\) did not end ready: \d+ \(failed\)"):
        call_command("ingest", str(good), str(empty), "--tenant", "acme", "--kb", "docs", "--wait", "--timeout", "300")
    out = capsys.readouterr().out
    assert '"status": "ready"' in out and '"status": "failed"' in out
    assert Document.objects.get(filename="empty.pdf").status == Document.Status.FAILED


def test_ingest_wait_succeeds_when_every_document_is_ready(world, tmp_path):
    good = tmp_path / "notes.txt"
    good.write_text("The harbour master logs the tide every morning at six.\n" * 5)
    call_command("ingest", str(good), "--tenant", "acme", "--kb", "docs", "--wait", "--timeout", "300")
    assert Document.objects.get(filename="notes.txt").status == Document.Status.READY


@pytest.mark.django_db(transaction=True)
def test_a_delete_whose_index_removal_failed_says_so_and_reconcile_repair_clears_it(world, settings,
                                                                                    lite_vector_settings):
    from io import BytesIO

    from ingest.actions import ingest_document
    from ingest.tasks import run_inline
    from retrieval.backends import reset_backends
    from retrieval.projection import reconcile
    from tenants.access import permitted_scope

    upload = ingest_document(permitted_scope(world.alice, write=True), world.docs,
                             BytesIO(b"The harbour master logs the tide every morning at six.\n" * 5), "tide.txt")
    document = run_inline(upload.document.pk)
    assert document.status == Document.Status.READY
    working = settings.LOCI_KEYWORD_INDEX
    # The keyword index unreachable while the delete runs: a file no process can create.
    settings.LOCI_KEYWORD_INDEX = {**working, "OPTIONS": {**working["OPTIONS"], "path": "/proc/loci-none/k.sqlite3",
                                                          "directory": "/proc/loci-none/keyword-index"}}
    reset_backends()
    try:
        with pytest.raises(CommandError, match="Deleted document .* from the database, but removing its rows from "
                                               "the indexes failed .* reconcile --repair"):
            call_command("delete", "--tenant", "acme", "--document", str(document.pk), "--yes")
    finally:
        settings.LOCI_KEYWORD_INDEX = working
        reset_backends()
    assert not Document.objects.filter(pk=document.pk).exists()  # the database part is done
    assert reconcile(world.acme)["keyword"]["stale"] > 0  # what the removal left is reported
    call_command("reconcile", "--tenant", "acme", "--repair")
    report = reconcile(world.acme)
    assert report["keyword"]["stale"] == report["vector"]["stale"] == 0, report
