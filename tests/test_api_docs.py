"""The API reference works offline: Swagger UI and Redoc load only what this server serves."""

import re

import pytest
from django.core.management import call_command
from django.test import Client

ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
EXTERNAL = re.compile(r"""["'(](?:https?:)?//[^"')\s]+""", re.IGNORECASE)


@pytest.fixture
def collected(settings, tmp_path):
    """Static files collected as `make run` does, served by whitenoise as in production."""
    settings.STATIC_ROOT = tmp_path / "staticfiles"
    settings.DEBUG = False
    call_command("collectstatic", "--no-input", verbosity=0)
    return Client()  # a new client, so whitenoise scans the new STATIC_ROOT


@pytest.mark.parametrize("page", ["/api/docs/", "/api/redoc/"])
def test_the_docs_pages_load_nothing_from_outside_and_their_assets_are_served(db, collected, page):
    response = collected.get(page)
    assert response.status_code == 200
    html = response.content.decode()
    assert not EXTERNAL.findall(html), f"{page} references outside URLs"
    assets = [a for a in ASSET.findall(html) if not a.startswith("data:")]
    assert any(a.endswith(".js") for a in assets), assets
    for asset in assets:
        served = collected.get(asset)
        assert served.status_code == 200, asset
        body = b"".join(served.streaming_content) if served.streaming else served.content
        assert len(body) > 100, asset  # the bundle itself, not an empty placeholder


def test_the_schema_the_pages_load_is_served(db, collected):
    response = collected.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert "/api/v1/memories/search" in response.json()["paths"]  # no trailing slash: one rule for every path
