"""Every console page passes axe-core with 0 violations, in a real browser (issue 19).

axe-core's built file is vendored in tests/data/axe/ (`make vendor-axe`): no npm and no network at
test time. It runs with its default rules (WCAG 2.x A/AA and best practices: one h1 per page, every
scrollable region reachable by keyboard, no focusable control inside another, contrast) on each page
in the states a user meets: the upload table with files uploading or queued, working, ready, failed,
duplicate and cancelled; search with results and every "why" open; a memory's history and edit form;
the entity and profile pages; 403 and 404. All pages are checked before the test fails, so one run
names every violation.
"""

import json
import re

import pytest

from tests.browser_fixtures import PROCESSING_TIMEOUT_MS, sign_in
from tests.conftest import DOCS
from tests.test_console_browser import PDF
from tests.worker_process import REPO

# The first browser test of a run also starts the session's installation and Chromium.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

AXE_SOURCE = (REPO / "tests" / "data" / "axe" / "axe.min.js").read_text(encoding="utf-8")

SETUP = """
from memory.models import Memory
from tenants.models import KnowledgeBase, Tenant
acme = Tenant.objects.get(slug=TENANT)
Memory.objects.create(tenant=acme, kb=KnowledgeBase.objects.get(tenant=acme, slug="docs"), kind=Memory.Kind.PROFILE,
                      user_id="u-ada", text="Ada prefers tea.", topic="preference",
                      metadata={"subject": "Ada", "category": "preference", "value": "tea"})
"""


class Audit:
    """axe-core on each page visited; every violation kept with the page it was on."""

    def __init__(self):
        self.violations, self.pages = [], []

    def check(self, page, name: str) -> None:
        page.wait_for_load_state("load")
        if not page.evaluate("() => typeof window.axe !== 'undefined'"):
            page.add_script_tag(content=AXE_SOURCE)
        found = page.evaluate("() => axe.run(document, {resultTypes: ['violations']}).then((r) => r.violations"
                              ".map((v) => ({id: v.id, impact: v.impact, help: v.help,"
                              " nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ') + ' ' + n.html.slice(0, 160)"
                              " + ' | ' + (n.failureSummary || '').replace(/\\s+/g, ' ').slice(0, 240))})))")
        self.pages.append(name)
        self.violations += [{"page": name, **v} for v in found]

    def report(self) -> str:
        return "\n".join(f"{v['page']}: {v['id']} ({v['impact']}) {v['help']} — {v['nodes']}" for v in self.violations)


def upload_states(page) -> set[str]:
    return set(page.locator("#upload-list .upload-item").evaluate_all("rows => rows.map((r) => r.dataset.state)"))


def test_every_console_page_has_no_axe_violations(console, browser, tmp_path):
    acme = console.tenant(viewers=1)  # its owner ("alice") and a viewer ("vera")
    console.shell(SETUP.replace("TENANT", repr(acme.slug)))
    audit = Audit()

    anonymous = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=console.base).new_page()
    anonymous.goto("/login/")
    audit.check(anonymous, "login")
    anonymous.fill("input[name=username]", acme.user)
    anonymous.fill("input[name=password]", "wrong password")
    anonymous.click("button[type=submit]")
    anonymous.wait_for_selector(".flash-error")
    audit.check(anonymous, "login with an error")

    alice = sign_in(browser, console.base, acme.user, acme.password)
    audit.check(alice, "knowledge bases")
    alice.goto("/kbs/new/")
    audit.check(alice, "new knowledge base")
    alice.get_by_role("button", name="Create").click()
    alice.wait_for_selector(".field-error")
    audit.check(alice, "new knowledge base with errors")
    alice.goto("/kbs/docs/edit/")
    audit.check(alice, "edit knowledge base")
    alice.goto("/kbs/docs/delete/")
    audit.check(alice, "delete knowledge base")

    # Upload: the empty page, then a table in every state a file passes through.
    alice.goto("/upload/")
    audit.check(alice, "upload (empty)")
    notes = []
    for i in range(12):
        path = tmp_path / f"note-{i:02d}.txt"
        path.write_text(f"Meeting note {i}. Project Heron item {i} is owned by person {i}.\n", encoding="utf-8")
        notes.append(str(path))
    alice.set_input_files("#pick-files", [str(PDF), *notes, str(DOCS / "empty.txt")])
    seen = upload_states(alice)
    audit.check(alice, f"upload just picked {sorted(seen)}")
    last = alice.locator("#upload-list .upload-item").nth(12)
    last.locator("[data-cancel]").wait_for(state="visible", timeout=60_000)
    seen |= upload_states(alice)
    audit.check(alice, f"upload in progress {sorted(upload_states(alice))}")
    last.locator("[data-cancel]").click()
    alice.wait_for_selector('#upload-list .upload-item:nth-child(13)[data-state="cancelled"]', timeout=30_000)
    alice.wait_for_function("""() => [...document.querySelectorAll('#upload-list .upload-item')]
        .some((row) => row.dataset.state === 'working')
        || [...document.querySelectorAll('#upload-list .upload-item')]
        .every((row) => ['ready', 'failed', 'cancelled'].includes(row.dataset.state))""",
                            timeout=PROCESSING_TIMEOUT_MS)
    seen |= upload_states(alice)
    audit.check(alice, f"upload while working {sorted(upload_states(alice))}")
    alice.wait_for_function("""() => [...document.querySelectorAll('#upload-list .upload-item')]
        .every((row) => ['ready', 'failed', 'cancelled'].includes(row.dataset.state))""", timeout=PROCESSING_TIMEOUT_MS)
    alice.set_input_files("#pick-files", [str(PDF)])
    alice.wait_for_selector('#upload-list .upload-item:nth-child(15)[data-state="duplicate"]', timeout=30_000)
    alice.locator('[data-filter="failed"]').click()
    audit.check(alice, "upload filtered to failed")
    alice.locator('[data-filter="all"]').click()
    seen |= upload_states(alice)
    audit.check(alice, f"upload finished {sorted(upload_states(alice))}")
    assert {"ready", "failed", "cancelled", "duplicate"} <= seen and seen & {"uploading", "queued", "pending"}, seen

    alice.goto("/documents/")
    audit.check(alice, "documents")
    alice.locator("a", has_text="fake-memo.pdf").first.click()
    alice.wait_for_selector(".section-block")
    memo_url = alice.url
    alice.locator("[data-details-toggle=open]").click()
    audit.check(alice, "document detail (sections open)")
    failed = alice.evaluate("""() => fetch('/documents/?status=failed').then((r) => r.text())""")
    failed_id = re.search(r'href="/documents/(\d+)/"', failed)
    if failed_id:
        alice.goto(f"/documents/{failed_id.group(1)}/")
        audit.check(alice, "document detail (failed)")
    alice.goto(memo_url + "delete/")
    audit.check(alice, "delete document")

    # Search: the intro, results with every "why" open and the curl request shown, then the PDF viewer.
    alice.goto("/search/")
    audit.check(alice, "search (empty)")
    alice.goto("/search/?q=How+many+trucks+were+used%3F&method=hybrid&chunks=1")
    alice.wait_for_selector(".result")
    audit.check(alice, "search results")
    alice.locator("[data-why-all]").click()
    alice.locator(".curl-request summary").click()
    audit.check(alice, "search results with why")
    alice.goto("/search/?q=zzqx+wvvk&method=hybrid")
    audit.check(alice, "search with nothing found")
    alice.goto("/search/?q=How+many+trucks+were+used%3F&method=hybrid&chunks=1")
    alice.locator(".result", has_text="3 trucks").first.locator("a.original-link").first.click()
    alice.wait_for_function("() => document.getElementById('pdf-viewer').dataset.rendered", timeout=30_000)
    audit.check(alice, "document view (PDF at its citation)")

    # Memories, a memory's history and its edit form (with an error shown).
    alice.goto("/memories/")
    audit.check(alice, "memories (episodes)")
    alice.goto("/memories/?kind=atomic_fact")
    audit.check(alice, "memories (facts)")
    alice.goto("/memories/?kind=atomic_fact&q=zzqx")
    audit.check(alice, "memories (none match)")
    alice.goto("/memories/?kind=atomic_fact")
    alice.locator(".memory").first.locator("[data-history]").click()
    audit.check(alice, "memory history")
    alice.get_by_role("link", name="Edit").click()
    audit.check(alice, "memory edit")
    alice.fill("#id_text", "   ")
    alice.get_by_role("button", name="Save").click()
    alice.wait_for_selector(".field-error")
    audit.check(alice, "memory edit with an error")

    alice.goto("/entities/")
    audit.check(alice, "entities")
    alice.locator(".entity-row a").first.click()
    alice.wait_for_url(re.compile(r"/entities/\d+/$"))
    audit.check(alice, "entity detail")
    alice.goto("/profiles/u-ada/")
    audit.check(alice, "profile")

    assert alice.goto("/documents/999999999/").status == 404
    audit.check(alice, "404")
    vera = sign_in(browser, console.base, *acme.viewers[0])
    audit.check(vera, "knowledge bases (read-only)")
    assert vera.goto("/kbs/new/").status == 403
    audit.check(vera, "403")

    # The dark theme (prefers-color-scheme) has colours of its own: contrast is checked there too.
    for who, path in ((anonymous, "/login/"), (alice, "/"), (alice, "/upload/"), (alice, memo_url),
                      (alice, "/search/?q=How+many+trucks+were+used%3F&method=hybrid&chunks=1"),
                      (alice, "/memories/?kind=atomic_fact"), (alice, "/entities/"), (alice, "/profiles/u-ada/")):
        who.emulate_media(color_scheme="dark")
        if path == "/login/":
            who.context.clear_cookies()
        who.goto(path)
        if path.startswith("/search/"):
            who.locator("[data-why-all]").click()
        audit.check(who, f"dark: {path}")

    assert not audit.violations, f"{len(audit.violations)} violations on {len(audit.pages)} pages:\n{audit.report()}"
    assert alice.js_errors == [] and vera.js_errors == []
    print(json.dumps(audit.pages))
