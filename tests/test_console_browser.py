"""The console end to end in a real browser, against real processes.

The session's installation (tests/browser_fixtures.py: a uvicorn web server and a `celery worker`
over one throwaway var dir, exactly as `manage.py up` runs them; nothing is eager). Chromium drives
the pages as the owner of a tenant of the test's own ("alice"), then as the owner of another
("charlie"). Screenshots of the main pages land in $TMPDIR/loci-screenshots/, or in
docs/screenshots/ (the README's pictures) when LOCI_SCREENSHOTS=docs, so a test run leaves the
checkout clean.
"""

import re

import pytest

from tests.browser_fixtures import PROCESSING_TIMEOUT_MS, shot, sign_in
from tests.conftest import DOCS

# The first browser test of a run also starts the session's installation and Chromium.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PDF, DOCX, EMPTY = DOCS / "pdf" / "fake-memo.pdf", DOCS / "fake.docx", DOCS / "empty.txt"
ZH_TEXT = "项目预算会议纪要\n\n本项目的预算为四万欧元，由王芳负责。\n\n发布会定于三月十二日在上海举行。\n"


@pytest.fixture(scope="module")
def memo_tenant(console):
    """A tenant whose `docs` holds the memo, processed by the worker, and another tenant: for the
    tests that read the memo (they change nothing, so they may share it)."""
    memo, other = console.tenants(2)
    console.ingest(memo, PDF)
    return memo, other


def test_upload_watch_open_search_and_isolation(console, browser, tmp_path):
    zh = tmp_path / "会议纪要.txt"
    zh.write_text(ZH_TEXT, encoding="utf-8")
    server = console.base
    acme, globex = console.tenants(2)
    alice = sign_in(browser, server, acme.user, acme.password)

    # Upload: every file gets its own row whose stage moves live while the worker runs.
    alice.goto("/upload/")
    alice.evaluate("""() => {
        window.seenStages = new Set();
        new MutationObserver(() => document.querySelectorAll('#upload-list [data-status-pill]')
            .forEach((pill) => window.seenStages.add(pill.textContent.replace(/ \\d+%$/, ''))))
          .observe(document.getElementById('upload-list'), {subtree: true, childList: true, characterData: true});
    }""")
    alice.set_input_files("#pick-files", [str(PDF), str(DOCX), str(zh), str(EMPTY)])
    rows = alice.locator("#upload-list .upload-item")
    assert rows.count() == 4
    # A stage in progress, or (with a warm embedding cache the files can finish between two polls)
    # everything done already: the MutationObserver above still records every stage the rows showed.
    alice.wait_for_function("""() => [...document.querySelectorAll('#upload-list [data-status-pill]')]
        .some((p) => ['parsing', 'extracting', 'indexing'].includes(p.textContent))
        || [...document.querySelectorAll('#upload-list .upload-item')]
        .every((row) => ['ready', 'failed'].includes(row.dataset.state))""", timeout=PROCESSING_TIMEOUT_MS)
    shot(alice, "upload-progress")
    alice.wait_for_function("""() => [...document.querySelectorAll('#upload-list .upload-item')]
        .every((row) => ['ready', 'failed'].includes(row.dataset.state))""", timeout=PROCESSING_TIMEOUT_MS)
    states = rows.evaluate_all("rows => rows.map((r) => [r.querySelector('.file-name').textContent, r.dataset.state,"
                               " r.querySelector('.upload-note').textContent])")
    assert [state for _, state, _ in states] == ["ready", "ready", "ready", "failed"], states
    seen = set(alice.evaluate("() => [...window.seenStages]"))
    assert {"uploading", "ready"} <= seen and seen & {"queued", "parsing", "extracting", "indexing"}, seen
    assert alice.locator("#upload-summary").inner_text() == "4 files · 3 ready · 1 failed"

    # A failed file shows its reason. An empty file is a permanent failure (retrying cannot help,
    # issue 13 §3), so it offers no Retry button; a retryable failure's button is tested in
    # tests/test_stage_claims.py, and its rerun through the API there and in test_api_foundation.
    assert states[3][2].strip(), "a failed file must say why"
    assert not rows.nth(0).locator("[data-retry]").is_visible()
    assert not rows.nth(3).locator("[data-retry]").is_visible()

    # The same file again is reported as a duplicate, not ingested a second time.
    alice.set_input_files("#pick-files", [str(PDF)])
    alice.wait_for_selector('#upload-list .upload-item:nth-child(5)[data-state="duplicate"]', timeout=30_000)
    assert "not ingested again" in alice.locator("#upload-list .upload-item:nth-child(5) .upload-note").inner_text()
    alice.wait_for_timeout(600)  # let the last bar finish its transition before the picture
    shot(alice, "upload-done", full_page=True)

    # The document page: metadata, download link, parsed structure with anchors, episode and facts.
    alice.locator("#upload-list .upload-item").first.locator("[data-open]").click()
    alice.wait_for_selector(".section-block")
    memo_url = alice.url
    memo_id = re.search(r"/documents/(\d+)/", memo_url).group(1)
    assert alice.locator("h1").inner_text() == "fake-memo.pdf"
    assert alice.locator(f'a[href="/documents/{memo_id}/original/"]').count() == 1
    assert "3 trucks" in alice.locator(".episode").first.inner_text()
    alice.locator("[data-details-toggle=open]").click()
    assert alice.locator(".chunk[id^=chunk-]").first.is_visible()
    shot(alice, "document", full_page=True)

    # Search for a fact of the memo: it comes back highlighted, with its page, and the source opens the chunk.
    alice.goto("/search/")
    alice.evaluate("document.activeElement.blur()")
    alice.keyboard.press("/")  # the shortcut to the query box
    alice.keyboard.type("How many trucks were used?")
    alice.keyboard.press("Enter")
    alice.wait_for_selector(".results-head")
    fact = alice.locator(".result", has_text="3 trucks").first
    assert fact.locator("mark", has_text="trucks").count() == 1
    source = fact.locator("a.source-link").first
    assert "fake-memo.pdf" in source.inner_text() and "p. 1" in source.inner_text()
    assert re.search(r"ms$", alice.locator("[data-took]").inner_text())
    alice.locator("[data-why-all]").click()
    assert fact.locator(".why-table").first.is_visible()
    assert "final" in fact.locator(".why-table").first.inner_text()
    # The steps add up to the badge: the search's trail ends on the card's number (issue 38).
    why = fact.locator(".why-table").first
    numbers = [text for text in why.locator("td.num").all_inner_texts() if text.strip()]
    assert "→ retrieve" in why.inner_text()
    assert abs(float(numbers[-1]) - float(fact.locator(".score").first.inner_text())) < 0.0006
    shot(alice, "search-why")
    href = source.get_attribute("href")
    chunk_id = href.rsplit("#chunk-", 1)[1]
    source.click()
    alice.wait_for_url(re.compile(rf"/documents/{memo_id}/.*#chunk-{chunk_id}$"))
    assert alice.locator(f"#chunk-{chunk_id}").is_visible()  # its collapsed section was opened for it

    # Chinese: jieba-segmented terms are highlighted.
    alice.goto("/search/?q=" + "项目预算是多少" + "&method=hybrid&chunks=1")
    zh_hit = alice.locator(".result", has_text="四万欧元").first
    assert zh_hit.locator("mark").count() >= 1
    shot(alice, "search-zh")

    alice.goto("/memories/?kind=atomic_fact")
    assert alice.locator(".memory", has_text="3 trucks").count() == 1
    shot(alice, "memories")
    alice.goto("/")
    card = alice.locator(".kb-card", has_text="Docs")
    assert card.locator("dd").first.inner_text() == "4" and "1 failed document" in card.inner_text()

    # Knowledge bases: create one (the slug follows the name), then delete it behind its typed slug.
    alice.click("text=New knowledge base")
    alice.fill("#id_name", "Product handbook")
    assert alice.input_value("#id_slug") == "product-handbook"
    alice.fill("#id_description", "产品说明、发布计划与常见问题。")
    alice.fill("#id_language", "zh")
    alice.get_by_role("button", name="Create").click()
    alice.wait_for_url(server + "/")
    assert "Created knowledge base" in alice.locator(".flash").inner_text()
    shot(alice, "kb-list")
    alice.locator(".kb-card", has_text="Product handbook").locator("text=Delete").click()
    delete = alice.locator("[data-confirm-target]")
    assert delete.is_disabled()
    alice.fill("#confirm-slug", "product-handbook")
    assert delete.is_enabled()
    shot(alice, "kb-delete")
    delete.click()
    alice.wait_for_url(server + "/")
    assert alice.locator(".kb-card").count() == 1
    assert alice.js_errors == []

    # Another tenant sees none of it: not in lists, not by id, not in search, not in the status feed.
    charlie = sign_in(browser, server, globex.user, globex.password)
    assert "fake-memo" not in charlie.content()
    charlie.goto("/documents/")
    assert charlie.locator("text=No documents yet").count() == 1
    assert charlie.goto(memo_url).status == 404
    assert charlie.goto(f"/documents/{memo_id}/original/").status == 404
    charlie.goto("/search/?q=How+many+trucks+were+used%3F&method=hybrid&chunks=1")
    assert charlie.locator(".result").count() == 0
    assert charlie.locator("text=No results for").count() == 1
    status = charlie.request.get(f"/documents/status.json?ids={memo_id}").json()
    assert status == {"documents": []}
    charlie.goto("/memories/?kind=atomic_fact")
    assert charlie.locator(".memory").count() == 0


def test_fifty_files_in_one_table_with_honest_progress_and_cancel(console, browser, tmp_path):
    """50 files at once: one compact row each, a queued state with its place in line, filters, and
    Cancel on a file still waiting (it never runs, says who cancelled it, and may be retried)."""
    files = []
    for i in range(50):
        path = tmp_path / f"note-{i:02d}.txt"
        path.write_text(f"Meeting note {i}. Project Falcon item {i} is owned by person {i}.\n", encoding="utf-8")
        files.append(str(path))
    acme = console.tenant()
    alice = sign_in(browser, console.base, acme.user, acme.password)
    alice.goto("/upload/")
    alice.evaluate("""() => {
        window.seenDetails = new Set();
        new MutationObserver(() => document.querySelectorAll('#upload-list [data-stage-detail]')
            .forEach((d) => d.textContent && window.seenDetails.add(d.textContent)))
          .observe(document.getElementById('upload-list'), {subtree: true, childList: true, characterData: true});
    }""")
    alice.set_input_files("#pick-files", files)
    rows = alice.locator("#upload-list .upload-item")
    assert rows.count() == 50
    last = rows.nth(49)
    last.locator("[data-cancel]").wait_for(state="visible", timeout=60_000)
    assert last.get_attribute("data-state") == "queued"
    last.locator("[data-cancel]").click()
    alice.wait_for_selector('#upload-list .upload-item:nth-child(50)[data-state="cancelled"]', timeout=30_000)
    assert last.locator(".upload-note").inner_text() == f"Cancelled by {acme.user}"
    assert last.locator("[data-retry]").is_visible() and not last.locator("[data-cancel]").is_visible()
    shot(alice, "upload-table-progress")

    alice.wait_for_function("""() => [...document.querySelectorAll('#upload-list .upload-item')]
        .every((row) => ['ready', 'failed', 'cancelled'].includes(row.dataset.state))""", timeout=PROCESSING_TIMEOUT_MS)
    assert alice.locator("#upload-summary").inner_text() == "50 files · 49 ready · 1 cancelled"
    # Waiting files said where they were in line; none claimed a stage it was not running.
    details = set(alice.evaluate("() => [...window.seenDetails]"))
    assert any(re.search(r"\d+ ahead|next in line", d) for d in details), details
    # Compact: 50 rows fit in a page a few screens tall (cards made 22 files about 4,000 px).
    table_height = alice.locator("#upload-table").bounding_box()["height"]
    assert table_height < 50 * 50, table_height
    times = rows.evaluate_all("rows => rows.slice(0, 49).map((r) => r.querySelector('[data-time]').textContent)")
    assert all(t.startswith("took ") for t in times), times
    assert rows.first.locator(".file-ext").text_content() == "txt"

    alice.locator('[data-filter="failed"]').click()
    visible = rows.evaluate_all("rows => rows.filter((r) => r.offsetParent !== null).length")
    assert visible == 1
    alice.locator('[data-filter="all"]').click()
    shot(alice, "upload-table-done", full_page=True)

    # The cancelled file was never processed, and Retry runs it.
    last.locator("[data-retry]").click()
    alice.wait_for_selector('#upload-list .upload-item:nth-child(50)[data-state="ready"]', timeout=60_000)
    assert alice.locator("#upload-summary").inner_text() == "50 files · 50 ready"
    assert alice.js_errors == []


def test_a_cited_pdf_opens_at_its_page_with_the_passage_highlighted(server, browser, memo_tenant):
    """Search result → "open the original": pdf.js (vendored, no CDN) shows the cited page, passage marked."""
    memo, _ = memo_tenant
    alice = sign_in(browser, server, memo.user, memo.password)
    external = []
    alice.on("request", lambda r: external.append(r.url) if not r.url.startswith(server) else None)
    alice.goto("/search/?q=How+many+trucks+were+used%3F&method=hybrid&chunks=1")
    link = alice.locator(".result", has_text="3 trucks").first.locator("a.original-link").first
    assert "p. 1" in link.inner_text()
    link.click()
    alice.wait_for_url(re.compile(r"/documents/\d+/view/\?chunk=\d+$"))
    alice.wait_for_function("() => document.getElementById('pdf-viewer').dataset.rendered", timeout=30_000)
    viewer = alice.locator("#pdf-viewer")
    assert viewer.get_attribute("data-rendered") == "1"
    assert int(viewer.get_attribute("data-hits")) > 0
    assert "trucks" in " ".join(alice.locator(".pdf-hit").all_inner_texts()).lower()
    assert external == [] and alice.js_errors == []
    shot(alice, "pdf-at-citation")


def test_entity_pages_list_and_open_an_entity_named_by_the_memo(server, browser, memo_tenant):
    memo, other = memo_tenant
    alice = sign_in(browser, server, memo.user, memo.password)
    alice.goto("/entities/")
    rows = alice.locator(".entity-row")
    assert rows.count() > 0
    shot(alice, "entities")
    rows.first.locator("a").click()
    alice.wait_for_url(re.compile(r"/entities/\d+/$"))
    assert alice.locator("h1").inner_text().strip()
    assert alice.locator(".entity-mention").count() > 0
    assert alice.js_errors == []
    charlie = sign_in(browser, server, other.user, other.password)
    assert charlie.goto(alice.url).status == 404
