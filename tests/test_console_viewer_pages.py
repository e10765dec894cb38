"""The original at the cited place for sheets, decks, transcripts and emails (Django client, real files).

Each file is uploaded and parsed by the real parse stage, so the chunks a source cites are the real
ones; the viewer reads the stored original, and the test checks the cited place against the file
itself (openpyxl, python-pptx, the cue times), not against the viewer's own matching.
"""

import re
import shutil
from pathlib import Path

import openpyxl
import pymupdf
import pytest
from django.conf import settings
from django.test import Client

from ingest.tasks import stage_outcome
from memory.actions import delete_document, delete_knowledge_base
from memory.models import Chunk, Document
from tenants.access import permitted_scope
from tests.conftest import DOCS, SHARED_DATA
from tests.test_document_cancel import upload

VTT = SHARED_DATA / "docs" / "vtt" / "videojs-elephantsdream" / "captions.en.vtt"


def _parsed(world, path: Path, kb=None):
    document = upload(world, path, kb=kb)
    assert stage_outcome(document.pk, "parse") == "finished"
    document.refresh_from_db()
    return document


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _cited(html: str, attribute: str) -> list[str]:
    """The values of `attribute` on the elements the page marks as cited."""
    return [m.group(1) for m in re.finditer(rf'<[^>]*{attribute}="([^"]+)"[^>]*data-cited', html)]


def test_an_xlsx_citation_opens_its_sheet_at_the_cited_rows(world):
    document = _parsed(world, DOCS / "stanley-cups.xlsx")
    # The second sheet repeats the first's table: the citation must open the sheet it names.
    chunk = (document.chunks.filter(level=Chunk.Level.CHILD, sheet="Stanley Cups Since 67", text__contains="Team: ")
             .order_by("ordinal").first())
    sheet = openpyxl.load_workbook(DOCS / "stanley-cups.xlsx", read_only=True)["Stanley Cups Since 67"]
    rows = list(enumerate(sheet.iter_rows(values_only=True), start=1))
    expected = [str(n) for n, row in rows if row and row[0] and f"Team: {row[0]} |" in chunk.text]
    assert expected, chunk.text
    # The table's one-cell caption line joins its chunk (issue 16), so its row is cited too.
    caption = [str(n) for n, row in rows if row and sum(c is not None for c in row) == 1
               and chunk.text.startswith(str(row[0]))]
    expected = caption + expected

    response = _client(world.alice).get(f"/documents/{document.pk}/view/?chunk={chunk.pk}")
    assert response.status_code == 200
    html = response.content.decode()
    assert _cited(html, "data-row") == expected
    assert 'aria-current="page">Stanley Cups Since 67</a>' in html  # the sheet tab shown is the cited one
    assert "script-src 'self'" in response["Content-Security-Policy"]
    # A row asked for by number is the one highlighted.
    html = _client(world.alice).get(f"/documents/{document.pk}/view/?sheet=Stanley+Cups&row=4").content.decode()
    assert _cited(html, "data-row") == ["4"]


def test_a_big_sheet_opens_at_the_cited_rows_not_at_the_top(world):
    document = _parsed(world, DOCS / "more-than-1k-cells.xlsx")
    last = document.chunks.filter(level=Chunk.Level.CHILD).order_by("-ordinal").first()
    html = _client(world.alice).get(f"/documents/{document.pk}/view/?chunk={last.pk}").content.decode()
    rows = _cited(html, "data-row")
    assert rows and int(rows[0]) > 20, rows
    first_shown = int(re.search(r'data-row="(\d+)"', html).group(1))
    assert first_shown <= int(rows[0]) and int(rows[0]) - first_shown <= 20


def test_a_slide_citation_opens_the_deck_at_that_slide(world):
    document = _parsed(world, DOCS / "sample-presentation.pptx")
    chunk = document.chunks.filter(level=Chunk.Level.PARENT, slide=3).first()
    html = _client(world.alice).get(f"/documents/{document.pk}/view/?chunk={chunk.pk}").content.decode()
    assert _cited(html, "data-slide") == ["3"]
    assert "This is the second content slide" in html and "This is the first content slide" in html
    assert "slide 3" in html
    html = _client(world.alice).get(f"/documents/{document.pk}/view/?slide=2").content.decode()
    assert _cited(html, "data-slide") == ["2"]


def test_a_transcript_citation_opens_the_cues_at_its_time(world):
    document = _parsed(world, VTT)
    chunk = document.chunks.filter(level=Chunk.Level.CHILD, start_time__gte=60).order_by("ordinal").first()
    html = _client(world.alice).get(f"/documents/{document.pk}/view/?chunk={chunk.pk}").content.decode()
    cited = re.findall(r'<tr id="cue-\d+" class="cited"[^>]*>\s*<td class="cue-time"><a href="\?t=([\d.]+)">', html)
    assert cited, chunk.text
    assert all(chunk.start_time - 0.01 <= float(t) <= chunk.end_time + 0.01 for t in cited)
    # Every cue the chunk holds is highlighted: as many as the chunk's cue lines.
    assert len(cited) >= 1 and float(cited[0]) == pytest.approx(chunk.start_time, abs=0.01)
    # ?t= opens the cue playing then: 00:00:18.166 --> 00:00:20.083 is the file's second cue.
    html = _client(world.alice).get(f"/documents/{document.pk}/view/?t=19").content.decode()
    assert re.search(r'<tr id="cue-2" class="cited"', html) and html.count('class="cited"') == 1


@pytest.mark.parametrize("name", ["eml/fake-email-attachment.eml", "fake-email-attachment.msg"])
def test_an_email_citation_shows_the_message_with_the_cited_attachment(world, name):
    document = _parsed(world, DOCS / name)
    chunk = document.chunks.filter(level=Chunk.Level.CHILD, text__contains="fake attachment").first()
    client = _client(world.alice)
    html = client.get(f"/documents/{document.pk}/view/?chunk={chunk.pk}").content.decode()
    assert "Fake email with attachment" in html and "mallori@unstructured.io" in html
    assert _cited(html, "id") == ["attachment-1"]
    assert f'href="/documents/{document.pk}/attachments/1/"' in html
    download = client.get(f"/documents/{document.pk}/attachments/1/")
    assert download.status_code == 200
    assert download["Content-Disposition"].startswith("attachment;") and "fake-attachment.txt" in download["Content-Disposition"]
    assert download["Content-Type"] == "application/octet-stream"
    assert b"".join(download.streaming_content).strip() == b"Hey this is a fake attachment!"
    assert client.get(f"/documents/{document.pk}/attachments/2/").status_code == 404
    # The message's own chunk cites the body, no attachment.
    own = document.chunks.filter(level=Chunk.Level.CHILD).order_by("ordinal").first()
    html = client.get(f"/documents/{document.pk}/view/?chunk={own.pk}").content.decode()
    assert _cited(html, "id") == [] and 'class="email-body cited"' in html


def test_an_html_email_is_shown_as_text_and_nothing_of_it_runs(world, tmp_path):
    hostile = tmp_path / "hostile.eml"
    hostile.write_text(
        "From: Eve <eve@example.com>\nTo: alice@example.com\nSubject: Invoice\nMIME-Version: 1.0\n"
        "Content-Type: text/html; charset=utf-8\n\n"
        "<html><body><p>Please pay the invoice.</p><script>alert('pwned')</script>"
        "<img src=\"http://tracker.example/pixel.gif\" onerror=\"alert(2)\"><a href=\"javascript:alert(3)\">pay</a>"
        "</body></html>\n")
    document = _parsed(world, hostile)
    response = _client(world.alice).get(f"/documents/{document.pk}/view/")
    html = response.content.decode()
    assert "Please pay the invoice." in html
    assert "<script>alert" not in html and "tracker.example" not in html and "javascript:alert" not in html
    assert "onerror" not in html
    assert "script-src 'self'" in response["Content-Security-Policy"]


def test_viewers_are_scoped_to_the_tenant(world):
    document = _parsed(world, DOCS / "eml" / "fake-email-attachment.eml")
    charlie = _client(world.charlie)
    assert charlie.get(f"/documents/{document.pk}/view/").status_code == 404
    assert charlie.get(f"/documents/{document.pk}/attachments/1/").status_code == 404


def test_bad_viewer_parameters_are_not_errors(world):
    sheet = _parsed(world, DOCS / "stanley-cups.xlsx")
    client = _client(world.alice)
    for query in ("?sheet=nope", "?row=abc", "?from=-3", "?row=99999999999999999999", "?chunk=0"):
        assert client.get(f"/documents/{sheet.pk}/view/{query}").status_code == 200, query
    cues = _parsed(world, VTT)
    for query in ("?t=abc", "?t=-5", "?t=1e309", "?t=nan"):
        assert client.get(f"/documents/{cues.pk}/view/{query}").status_code == 200, query
    assert client.get(f"/documents/{sheet.pk}/attachments/1/").status_code == 404  # not an email


def test_a_slide_can_be_shown_rendered_once_libreoffice_made_its_pdf(world, committed):
    if not shutil.which("soffice"):
        pytest.skip("LibreOffice is not installed")
    document = _parsed(world, DOCS / "sample-presentation.pptx")
    chunk = document.chunks.filter(level=Chunk.Level.PARENT, slide=3).first()
    client = _client(world.alice)
    text_view = client.get(f"/documents/{document.pk}/view/?chunk={chunk.pk}").content.decode()
    assert f'href="?chunk={chunk.pk}&amp;rendered=1"' in text_view
    page = client.get(f"/documents/{document.pk}/view/?chunk={chunk.pk}&rendered=1").content.decode()
    assert f'data-src="/documents/{document.pk}/slides.pdf"' in page and 'data-page="3"' in page

    pdf = client.get(f"/documents/{document.pk}/slides.pdf")
    assert pdf.status_code == 200 and pdf["Content-Type"] == "application/pdf"
    assert pdf["Content-Security-Policy"].startswith("sandbox")
    body = b"".join(pdf.streaming_content)
    assert body.startswith(b"%PDF")
    with pymupdf.open(stream=body, filetype="pdf") as rendered:  # a page per slide, the cited one's text on page 3
        assert rendered.page_count == 4 and "second content slide" in rendered[2].get_text()
    # Made once: the second request serves the cached file, not a new conversion.
    [cached] = (Path(settings.MEDIA_ROOT) / "previews").rglob("*.pdf")
    made = cached.stat().st_mtime_ns
    again = client.get(f"/documents/{document.pk}/slides.pdf")
    assert b"".join(again.streaming_content) == body and cached.stat().st_mtime_ns == made
    assert _client(world.charlie).get(f"/documents/{document.pk}/slides.pdf").status_code == 404
    sheet = _parsed(world, DOCS / "stanley-cups.xlsx")
    assert client.get(f"/documents/{sheet.pk}/slides.pdf").status_code == 404

    # Deleted means deleted: the rendered slides go with their document, after the commit.
    scope = permitted_scope(world.alice, write=True)
    committed(delete_document, scope, Document.objects.get(pk=document.pk))
    assert not cached.exists()
    # … and with their knowledge base.
    other = _parsed(world, DOCS / "sample-presentation.pptx", kb=world.notes)
    assert client.get(f"/documents/{other.pk}/slides.pdf").status_code == 200
    [kept] = (Path(settings.MEDIA_ROOT) / "previews").rglob("*.pdf")
    committed(delete_knowledge_base, scope, world.notes)
    assert not kept.exists()
