"""The console end to end in a real browser, against real processes.

A uvicorn web server and a `celery worker` run as subprocesses over one throwaway var dir (SQLite
file, filesystem broker, keyword index, Milvus Lite), exactly as `manage.py up` runs them; nothing
is eager. Chromium drives the pages as alice, then as charlie of another tenant. Screenshots of the
main pages land in $TMPDIR/loci-screenshots/, or in docs/screenshots/ (the README's pictures)
when LOCI_SCREENSHOTS=docs, so a test run leaves the checkout clean.
"""

import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import DOCS
from tests.worker_process import PYTHON, REPO, Worker, app_env, free_port, stop_milvus_lite

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("LOCI_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = (REPO / "docs" / "screenshots" if os.environ.get("LOCI_SCREENSHOTS") == "docs"
               else Path(tempfile.gettempdir()) / "loci-screenshots")
PDF, DOCX, EMPTY = DOCS / "pdf" / "fake-memo.pdf", DOCS / "fake.docx", DOCS / "empty.txt"
ZH_TEXT = "项目预算会议纪要\n\n本项目的预算为四万欧元，由王芳负责。\n\n发布会定于三月十二日在上海举行。\n"
PASSWORDS = {"alice": "alice-pw-123", "charlie": "charlie-pw-123"}
PROCESSING_TIMEOUT_MS = 150_000

SETUP = """
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("collectstatic", interactive=False, verbosity=0)
call_command("bootstrap", tenant="acme", kb="docs", user="alice", password="{alice}")
call_command("bootstrap", tenant="globex", kb="secret", user="charlie", password="{charlie}")
"""


def _wait_for_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"web server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"web server did not answer {url} within {timeout}s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    """A web server with a worker behind it (`.base`, and `.shell(code)` to run Django code against
    the same database); both stopped (by process group) afterwards."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    var = tmp_path_factory.mktemp("console")
    env = app_env(var, DEBUG="0")
    subprocess.run([PYTHON, "manage.py", "shell", "-c", SETUP.format(**PASSWORDS)], cwd=REPO, env=env, check=True,
                   capture_output=True, timeout=180)
    port = free_port()
    web_log = var / "web.log"
    with open(web_log, "ab") as log:
        web = subprocess.Popen([PYTHON, "-m", "uvicorn", "loci.asgi:application", "--host", "127.0.0.1",
                                "--port", str(port), "--no-access-log"], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    worker = Worker(env, var / "worker.log", name="console").start()
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for_http(base + "/login/", web, web_log)
        worker.wait_ready()
        yield ConsoleServer(base, env)
    finally:
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGTERM)
            try:
                web.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(web.pid, signal.SIGKILL)
                web.wait(timeout=15)
        worker.stop(timeout=15)
        stop_milvus_lite(var)


class ConsoleServer:
    def __init__(self, base: str, env: dict):
        self.base, self.env = base, env

    def shell(self, code: str) -> str:
        """Run Django code in the server's database (a `manage.py shell -c`); what it printed."""
        done = subprocess.run([PYTHON, "manage.py", "shell", "-c", code], cwd=REPO, env=self.env, check=True,
                              capture_output=True, text=True, timeout=180)
        return done.stdout


@pytest.fixture(scope="module")
def server(console):
    """Base URL of the console's web server."""
    return console.base


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def sign_in(browser, base: str, username: str):
    context = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=base)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto("/")  # anonymous: sent to the sign-in page first
    assert "/login/" in page.url
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORDS[username])
    page.click("button[type=submit]")
    page.wait_for_url(base + "/")
    page.js_errors = errors
    return page


def shot(page, name: str, *, full_page: bool = False) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    if full_page:
        page.evaluate("window.scrollTo(0, 0)")  # the sticky header is drawn where the page is scrolled to
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)


def test_upload_watch_open_search_and_isolation(server, browser, tmp_path):
    zh = tmp_path / "会议纪要.txt"
    zh.write_text(ZH_TEXT, encoding="utf-8")
    alice = sign_in(browser, server, "alice")

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
    charlie = sign_in(browser, server, "charlie")
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


def test_fifty_files_in_one_table_with_honest_progress_and_cancel(server, browser, tmp_path):
    """50 files at once: one compact row each, a queued state with its place in line, filters, and
    Cancel on a file still waiting (it never runs, says who cancelled it, and may be retried)."""
    files = []
    for i in range(50):
        path = tmp_path / f"note-{i:02d}.txt"
        path.write_text(f"Meeting note {i}. Project Falcon item {i} is owned by person {i}.\n", encoding="utf-8")
        files.append(str(path))
    alice = sign_in(browser, server, "alice")
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
    assert last.locator(".upload-note").inner_text() == "Cancelled by alice"
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


def test_a_cited_pdf_opens_at_its_page_with_the_passage_highlighted(server, browser):
    """Search result → "open the original": pdf.js (vendored, no CDN) shows the cited page, passage marked."""
    alice = sign_in(browser, server, "alice")
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


def test_entity_pages_list_and_open_an_entity_named_by_the_memo(server, browser):
    alice = sign_in(browser, server, "alice")
    alice.goto("/entities/")
    rows = alice.locator(".entity-row")
    assert rows.count() > 0
    shot(alice, "entities")
    rows.first.locator("a").click()
    alice.wait_for_url(re.compile(r"/entities/\d+/$"))
    assert alice.locator("h1").inner_text().strip()
    assert alice.locator(".entity-mention").count() > 0
    assert alice.js_errors == []
    charlie = sign_in(browser, server, "charlie")
    assert charlie.goto(alice.url).status == 404
