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
