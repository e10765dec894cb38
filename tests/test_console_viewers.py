"""The original at the cited place, and estimates from measured stage speeds, in a real browser.

The session's installation and Chromium (tests/browser_fixtures.py: uvicorn, a Celery worker, Milvus
Lite), in a tenant of this test's own. Screenshots as in tests/test_console_browser.py:
$TMPDIR/loci-screenshots/, or docs/screenshots/ with LOCI_SCREENSHOTS=docs.
"""

import re

import openpyxl
import pytest

from tests.browser_fixtures import PROCESSING_TIMEOUT_MS, shot, sign_in
from tests.conftest import DOCS, SHARED_DATA
from tests.test_console_accessibility import AXE_SOURCE, Audit

# The first browser test of a run also starts the session's installation and Chromium.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

VTT = SHARED_DATA / "docs" / "vtt" / "videojs-elephantsdream" / "captions.en.vtt"
CITED_ROW = 250


class ViewerAudit(Audit):
    """axe-core on pages whose CSP refuses inline script: evaluated over DevTools, not by a <script> tag."""

    def check(self, page, name: str) -> None:
        page.wait_for_load_state("load")
        if not page.evaluate("() => typeof window.axe !== 'undefined'"):
            page.evaluate(AXE_SOURCE)
        super().check(page, name)


def _all_finished(page, count: int) -> None:
    page.wait_for_function(f"""() => {{
        const rows = [...document.querySelectorAll('#upload-list .upload-item')];
        return rows.length === {count} && rows.every((row) => ['ready', 'failed'].includes(row.dataset.state));
    }}""", timeout=PROCESSING_TIMEOUT_MS)


def test_an_xlsx_citation_opens_at_its_row_and_estimates_come_from_measurements(console, browser, tmp_path):
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Tariffs"
    sheet.append(["Port", "Cargo", "Tariff (EUR/t)"])
    for n in range(2, 301):
        port = "Zanzibar harbour" if n == CITED_ROW else f"Port {n}"
        sheet.append([port, "grain" if n % 2 else "timber", n * 3])
    tariffs = tmp_path / "tariffs.xlsx"
    workbook.save(tariffs)

    acme = console.tenant()
    alice = sign_in(browser, console.base, acme.user, acme.password)
    csp_violations = []
    alice.on("console", lambda m: csp_violations.append(m.text) if "Content Security Policy" in m.text else None)
    alice.goto("/upload/")
    alice.evaluate("""() => {
        window.seenTimes = new Set();
        new MutationObserver(() => document.querySelectorAll('#upload-list [data-time]')
            .forEach((cell) => window.seenTimes.add(cell.textContent)))
          .observe(document.getElementById('upload-list'), {subtree: true, childList: true, characterData: true});
    }""")
    first = [tariffs, DOCS / "sample-presentation.pptx", DOCS / "eml" / "fake-email-attachment.eml", VTT]
    alice.set_input_files("#pick-files", [str(p) for p in first])
    _all_finished(alice, len(first))
    states = alice.locator("#upload-list .upload-item").evaluate_all("rows => rows.map((r) => r.dataset.state)")
    assert states == ["ready"] * len(first), states

    # Now the installation has measured every stage: files waiting or running say about how long
    # their work takes.
    alice.evaluate("() => window.seenTimes.clear()")
    notes = []
    for i in range(8):
        path = tmp_path / f"memo-{i}.txt"
        path.write_text(f"Memo {i}: the harbour committee met on day {i} and agreed on tariff {i * 7}.\n" * 40)
        notes.append(path)
    alice.set_input_files("#pick-files", [str(p) for p in notes])
    alice.wait_for_function("""() => [...document.querySelectorAll('#upload-list [data-time]')]
        .some((cell) => /about \\d+ (s|min)/.test(cell.textContent))""", timeout=PROCESSING_TIMEOUT_MS)
    shot(alice, "upload-estimates", full_page=True)
    _all_finished(alice, len(first) + len(notes))
    estimates = [t for t in alice.evaluate("() => [...window.seenTimes]") if "about" in t]
    assert estimates
    odd = [t for t in estimates if not re.fullmatch(r"(waiting|running) [^·]+ · about \d+ (s|min) (left|of work)", t)]
    assert odd == [], odd

    # Search → the row's chunk → "open the original": the sheet opens scrolled to the cited row.
    alice.goto("/search/?q=Zanzibar+harbour&method=keyword&chunks=1")
    result = alice.locator(".result", has_text="Zanzibar harbour").first
    link = result.locator("a.original-link").first
    assert "sheet “Tariffs”" in link.inner_text()
    link.click()
    alice.wait_for_url(re.compile(r"/documents/\d+/view/\?chunk=\d+$"))
    alice.wait_for_function("() => document.documentElement.dataset.viewerReady === 'cited'")
    cited = alice.locator("tr.cited")
    numbers = [int(n) for n in cited.evaluate_all("rows => rows.map((r) => r.dataset.row)")]
    assert CITED_ROW in numbers and len(numbers) <= 20, numbers
    row = alice.locator(f"tr#row-{CITED_ROW}")
    assert "Zanzibar harbour" in row.inner_text()
    box, height = row.bounding_box(), alice.viewport_size["height"]
    assert 0 <= box["y"] and box["y"] + box["height"] <= height, box  # scrolled into view
    assert not _in_view(alice, ".sheet-table tbody tr:first-child")  # it was scrolled to, not just rendered
    shot(alice, "xlsx-at-citation")
    audit = ViewerAudit()  # the viewers are console pages too: 0 axe violations, like every other page
    audit.check(alice, "sheet viewer")

    # The deck at a slide, the transcript at a cue, the email with its attachment: each cited place marked.
    alice.goto("/documents/?kb=")  # the ids, from the documents list's links
    documents = dict(alice.locator(".cell-name a").evaluate_all(
        "links => links.map((a) => [a.textContent.trim(), a.getAttribute('href').split('/')[2]])"))
    alice.goto(f"/documents/{documents['sample-presentation.pptx']}/view/?slide=3")
    assert alice.locator("[data-cited]").get_attribute("data-slide") == "3"
    shot(alice, "slide-at-citation")
    audit.check(alice, "slides viewer")
    alice.locator("[data-rendered-link]").click()  # LibreOffice renders the deck once; pdf.js shows slide 3
    alice.wait_for_function("() => document.getElementById('pdf-viewer').dataset.rendered", timeout=120_000)
    assert alice.locator("#pdf-viewer").get_attribute("data-rendered") == "3"
    shot(alice, "slide-rendered")
    audit.check(alice, "rendered slide")
    alice.goto(f"/documents/{documents['captions.en.vtt']}/view/?t=19")
    assert "At the right we can see" in alice.locator("tr.cited").inner_text()
    shot(alice, "transcript-at-cue")
    audit.check(alice, "transcript viewer")
    email_id = documents["fake-email-attachment.eml"]
    alice.goto("/search/?q=fake+attachment&method=keyword&chunks=1")
    alice.locator(".result", has_text="fake attachment").first.locator("a.original-link").first.click()
    alice.wait_for_url(re.compile(rf"/documents/{email_id}/view/\?chunk=\d+$"))
    attachment = alice.locator("li.cited")
    assert "fake-attachment.txt" in attachment.inner_text()
    with alice.expect_download() as download:
        attachment.locator("a").first.click()
    assert download.value.suggested_filename == "fake-attachment.txt"
    shot(alice, "email-with-attachment")
    audit.check(alice, "email viewer")
    assert not audit.violations, audit.report()
    assert alice.js_errors == [] and csp_violations == []


def _in_view(page, selector: str) -> bool:
    return page.evaluate(f"""() => {{
        const r = document.querySelector({selector!r}).getBoundingClientRect();
        return r.bottom > 0 && r.top < window.innerHeight && r.top >= document.querySelector('.sheet-wrap')
            .getBoundingClientRect().top;
    }}""")
