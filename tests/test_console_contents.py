"""The contents panel of a document page in a real browser (issue 39): axe-core finds no violation in
it, and a section's title takes the reader to that section's card."""

import re

import pytest

from tests.browser_fixtures import sign_in
from tests.test_console_accessibility import Audit
from tests.test_navigate import HANDBOOK

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_the_contents_panel_is_accessible_and_its_links_land_on_their_section(console, browser, tmp_path):
    acme = console.tenant()
    path = tmp_path / "handbook.md"
    path.write_text(HANDBOOK, encoding="utf-8")
    console.ingest(acme, path)
    alice = sign_in(browser, console.base, acme.user, acme.password)
    alice.goto("/documents/")
    alice.get_by_role("link", name="handbook.md").first.click()
    panel = alice.locator("nav.toc")
    panel.wait_for()
    audit = Audit()
    audit.check(alice, "document detail with its contents")
    assert not audit.violations, audit.report()

    assert panel.locator("li").count() == 5
    panel.get_by_role("link", name="Equipment").click()
    alice.wait_for_url(re.compile(r"#chunk-\d+$"))
    target = alice.locator(":target")
    assert "Remote work › Equipment" in target.locator(".section-path").inner_text()
    assert target.is_visible() and target.bounding_box()["y"] < 860  # scrolled to, not below the fold
