"""A new team's first hour in a real browser (issue 29): result cards, the curl snippet, API keys.

The web server, worker and Chromium are the session's (tests/browser_fixtures.py); this module works in a
tenant of its own.
"""

import json
import os
import re
import subprocess

import pytest

from tests.browser_fixtures import PROCESSING_TIMEOUT_MS, sign_in

pytestmark = pytest.mark.slow

FLEET = ("Fleet report for the northern depot.\n\n"
         "The depot used 3 trucks for the spring deliveries, and the budget for fuel was 4,200 euros. "
         + " ".join(f"Route {n} left the depot at {6 + n % 4}:15 and came back before noon with every parcel "
                    f"delivered, the driver noted the road works on the ring road near exit {n}."
                    for n in range(1, 16))
         + "\n\nThe maintenance plan: every truck is serviced after 20,000 km.\n")


def upload_and_wait(page, path) -> None:
    page.goto("/upload/")
    page.set_input_files("#pick-files", [str(path)])
    page.wait_for_function("""() => [...document.querySelectorAll('#upload-list .upload-item')]
        .every((row) => ['ready', 'failed', 'duplicate'].includes(row.dataset.state))""", timeout=PROCESSING_TIMEOUT_MS)


def issue_key(console, tenant: str, name: str, *, write: bool = False) -> str:
    out = console.shell(
        "from tenants.models import ApiKey, Tenant\n"
        f"print(ApiKey.issue(Tenant.objects.get(slug={tenant!r}), {name!r}, can_write={write})[1])")
    return out.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def fleet_tenant(console, tmp_path_factory):
    """A tenant of this module's with a fleet report processed by the worker into its KB."""
    tenant = console.tenant()
    path = tmp_path_factory.mktemp("fleet") / "fleet-report.txt"
    path.write_text(FLEET, encoding="utf-8")
    console.ingest(tenant, path)
    return tenant


@pytest.fixture
def fleet(console, browser, fleet_tenant):
    """Its owner, signed in."""
    return sign_in(browser, console.base, fleet_tenant.user, fleet_tenant.password)


def test_every_result_card_shows_its_text_citation_and_links_without_scrolling(fleet):
    alice = fleet
    alice.set_viewport_size({"width": 1024, "height": 860})
    kinds = set()
    for method in ("hybrid", "keyword", "vector"):
        alice.goto(f"/search/?q=How+many+trucks+did+the+depot+use%3F&method={method}&chunks=1&top_k=20")
        cards = alice.locator(".result-list > li.result")
        for i in range(cards.count()):
            card = cards.nth(i)
            kind = card.get_attribute("data-kind")
            kinds.add(kind)
            # The card is as tall as what it holds: nothing of it is hidden behind a scroll bar of its own.
            inner, outer = card.evaluate("c => [c.scrollHeight, c.clientHeight]")
            assert inner <= outer + 1, f"{method}: {kind} card {i} scrolls inside ({inner} > {outer})"
            text = card.locator(".result-text").first
            assert text.is_visible() and text.inner_text().strip(), (method, kind)
            # Nor does its text: a chunk's box that scrolled hid a slide's answer at its bottom (issue 39).
            inner, outer = text.evaluate("t => [t.scrollHeight, t.clientHeight]")
            assert inner <= outer + 1, f"{method}: {kind} card {i}'s text scrolls inside ({inner} > {outer})"
            source = card.locator("a.source-link").first
            assert source.is_visible() and "fleet-report.txt" in source.inner_text(), (method, kind)
            assert card.locator("a.original-link").first.is_visible(), (method, kind)
            assert card.locator("details.why > summary").first.is_visible(), (method, kind)
        if method == "hybrid":
            assert cards.locator(".result-chunk-text").count() >= 1
    assert {"chunk", "fact", "episode"} <= kinds, kinds
    assert alice.js_errors == []


def test_the_same_request_as_curl_answers_200_when_run_by_a_shell(fleet, console, fleet_tenant):
    alice = fleet
    alice.goto("/search/?q=trucks&method=hybrid&chunks=1")
    alice.locator(".curl-request summary").click()
    snippet = alice.locator("[data-curl]").inner_text()
    key = issue_key(console, fleet_tenant.slug, "curl-snippet")
    done = subprocess.run(["bash", "-c", snippet + " -sS -w '\\n%{http_code}'"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "LOCI_API_KEY": key})
    body, _, status = done.stdout.rpartition("\n")
    assert status == "200", (snippet, done.stdout, done.stderr)
    assert any("3 trucks" in json.dumps(item) for item in json.loads(body)["chunks"])
    assert re.search(r'-H "Authorization: Bearer \$LOCI_API_KEY"', snippet)


def test_an_owner_creates_a_read_only_key_in_the_console_uses_it_and_revokes_it(fleet, console):
    import httpx

    server = console.base
    alice = fleet
    alice.goto("/")
    alice.get_by_role("link", name="API keys").click()
    alice.fill("#key-name", "support-bot")
    alice.check("input[name=role][value=read-only]")
    alice.check("input[name=kb][value=docs]")
    alice.get_by_role("button", name="Create key").click()
    secret = alice.locator("[data-secret]").inner_text().strip()
    assert secret.startswith("loci_")
    row = alice.locator("tr", has_text="support-bot")
    assert "read-only" in row.inner_text() and "docs" in row.inner_text()
    assert "never" in row.locator("[data-last-used]").inner_text()

    headers = {"Authorization": f"Bearer {secret}"}
    found = httpx.post(server + "/api/v1/memories/search", headers=headers, timeout=60,
                       json={"query": "How many trucks?", "memory_types": ["chunk"]})
    assert found.status_code == 200 and "3 trucks" in found.text
    write = httpx.post(server + "/api/v1/memories", headers=headers, timeout=60, json={
        "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "hi",
                                                          "timestamp": "2024-01-01T00:00:00Z"}]})
    assert write.status_code == 403 and write.json()["error"] == "This API key is read-only."

    # Shown once: the page again lists the key, used now, and never its secret.
    alice.goto("/keys/")
    assert secret not in alice.content()
    row = alice.locator("tr", has_text="support-bot")
    assert "ago" in row.locator("[data-last-used]").inner_text()

    row.locator("summary", has_text="Revoke").click()
    row.get_by_role("button", name="Revoke support-bot").click()
    assert "Revoked “support-bot”" in alice.locator(".flash").inner_text()
    assert alice.locator("tr[data-revoked]", has_text="support-bot").count() == 1
    refused = httpx.get(server + "/api/v1/tenants", headers=headers, timeout=30)
    assert refused.status_code == 401
    assert alice.js_errors == []


def test_documents_are_sorted_ticked_together_and_rerun_from_the_list(fleet):
    alice = fleet
    alice.goto("/documents/")
    alice.locator("a.sort-link[data-sort=filename]").click()
    alice.wait_for_url(re.compile(r"sort=filename"))
    assert alice.locator("th[aria-sort=ascending]").inner_text().lower().startswith("name")
    alice.locator("[data-pick-all]").check()
    boxes = alice.locator('input[name="ids"]')
    assert boxes.count() >= 1 and all(boxes.nth(i).is_checked() for i in range(boxes.count()))
    alice.locator("[data-bulk-rerun]").click()
    assert re.search(r"Queued \d+ documents? again", alice.locator(".flash").first.inner_text())
    assert alice.js_errors == []


def test_at_1280_pixels_the_header_is_one_line(fleet):
    """Issue 39: at 1280 px the brand, the nav, the switchers and the user menu wrapped onto two lines."""
    alice = fleet
    alice.set_viewport_size({"width": 1280, "height": 800})
    for page in ("/", "/search/", "/documents/"):
        alice.goto(page)
        boxes = alice.locator(".topbar-inner > *").evaluate_all(
            "items => items.filter(i => i.offsetParent).map(i => [i.className, i.getBoundingClientRect().top, "
            "i.getBoundingClientRect().bottom, i.getBoundingClientRect().width, i.innerText.slice(0, 80)])")
        first_bottom = min(box[2] for box in boxes)
        wrapped = [name for name, top, *_ in boxes if top >= first_bottom]
        assert not wrapped, (page, boxes)
        nav = alice.locator(".nav")
        assert nav.evaluate("n => n.scrollWidth <= n.clientWidth + 1"), f"{page}: the nav scrolls sideways"
