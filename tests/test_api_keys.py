"""API keys from the REST API (issue 29): owners and admins issue, list, rename and revoke them; a key's
role and knowledge bases bound what it may do; the secret is shown once and stored hashed."""

import hashlib
import logging

import pytest

from tests.conftest import api_client

pytestmark = pytest.mark.usefixtures("api_schema_check")  # every response matches the OpenAPI schema


def create(client, **body):
    return client.post("/api/v1/keys", body, format="json")


def test_an_owner_creates_a_read_only_key_for_one_kb_and_sees_its_secret_once(world):
    from tenants.models import ApiKey

    alice = api_client(user=world.alice)
    response = create(alice, name="support-bot", role="read-only", knowledge_bases=["docs"])
    assert response.status_code == 201, response.json()
    made = response.json()
    secret = made["key"]
    assert secret.startswith(f"loci_{made['id']}_")
    assert {k: made[k] for k in ("name", "role", "knowledge_bases", "active", "created_by")} == {
        "name": "support-bot", "role": "read-only", "knowledge_bases": ["docs"], "active": True,
        "created_by": "user:alice"}
    stored = ApiKey.objects.get(key_id=made["id"])
    assert secret.split("_", 2)[2] not in stored.secret_hash
    assert stored.secret_hash == hashlib.sha256(secret.split("_", 2)[2].encode()).hexdigest()

    listed = alice.get("/api/v1/keys").json()
    assert "support-bot" in [k["name"] for k in listed]
    assert secret not in str(listed) and all("key" not in k for k in listed)
    assert alice.get(f"/api/v1/keys/{made['id']}").json()["last_used_at"] is None

    # The key reads its one KB, and nothing else; it may not write.
    bot = api_client(secret)
    assert [kb["slug"] for kb in bot.get("/api/v1/knowledge-bases").json()["results"]] == ["docs"]
    refused = bot.post("/api/v1/memories", {"user_id": "u", "session_id": "s", "messages": [
        {"role": "user", "content": "hi", "timestamp": "2024-01-01T00:00:00Z"}]}, format="json")
    assert refused.status_code == 403 and refused.json()["error"] == "This API key is read-only."
    assert alice.get(f"/api/v1/keys/{made['id']}").json()["last_used_at"] is not None


def test_a_read_write_key_writes(world):
    alice = api_client(user=world.alice)
    secret = create(alice, name="ingester", role="read-write").json()["key"]
    response = api_client(secret).post("/api/v1/memories", {"user_id": "u", "session_id": "s", "messages": [
        {"role": "user", "content": "I moved to Lyon.", "timestamp": "2024-01-01T00:00:00Z"}]}, format="json")
    assert response.status_code in (200, 201, 202), response.json()


def test_renaming_and_revoking_a_key_takes_effect_at_once(world, caplog):
    alice = api_client(user=world.alice)
    made = create(alice, name="old name").json()
    assert api_client(made["key"]).get("/api/v1/tenants").status_code == 200
    renamed = alice.patch(f"/api/v1/keys/{made['id']}/", {"name": "crm-sync"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "crm-sync"
    with caplog.at_level(logging.INFO, logger="tenants.keys"):
        revoked = alice.delete(f"/api/v1/keys/{made['id']}")
    assert revoked.status_code == 200 and revoked.json()["active"] is False and revoked.json()["revoked_at"]
    assert f"API key {made['id']} (crm-sync) revoked by user:alice" in caplog.text
    refused = api_client(made["key"]).get("/api/v1/tenants")
    assert refused.status_code == 401 and refused.json()["error"] == "Invalid or revoked API key."
    # Still listed, revoked: what it did stays attributable to it.
    assert [k["active"] for k in alice.get("/api/v1/keys").json() if k["id"] == made["id"]] == [False]


def test_a_write_by_a_key_is_logged_with_the_key(world, caplog):
    with caplog.at_level(logging.INFO, logger="tenants.authentication"):
        api_client(world.alice_key).post("/api/v1/knowledge-bases", {"slug": "k2", "name": "K2"}, format="json")
    key_id = world.alice_key.split("_")[1]
    assert f"API key {key_id} (alice-rw, tenant acme): POST /api/v1/knowledge-bases" in caplog.text


@pytest.mark.parametrize("who", ["bob", "alice_key", "charlie"])
def test_viewers_keys_and_other_tenants_cannot_manage_acmes_keys(world, who):
    client = api_client(world.alice_key) if who == "alice_key" else api_client(user=getattr(world, who))
    acme_ro = world.acme_ro_key.split("_")[1]
    if who == "charlie":  # another tenant's key is not found, not forbidden: nothing leaks
        assert client.get(f"/api/v1/keys/{acme_ro}").status_code == 404
        assert client.delete(f"/api/v1/keys/{acme_ro}").status_code == 404
        assert acme_ro not in str(client.get("/api/v1/keys").json())
        return
    for response in (client.get("/api/v1/keys"), create(client, name="x"), client.delete(f"/api/v1/keys/{acme_ro}")):
        assert response.status_code == 403, response.json()
        assert any(why in response.json()["error"] for why in ("owners and admins", "cannot manage", "read-only"))


@pytest.mark.parametrize("body, needle", [
    ({"name": "x", "role": "superuser"}, "role"),
    ({"name": "x", "knowledge_bases": ["docs", "secret"]}, "Unknown knowledge base: secret."),
    ({"name": "   "}, "name"),
    ({"role": "read-only"}, "name"),
])
def test_a_bad_request_is_400_with_a_reason(world, body, needle):
    response = create(api_client(user=world.alice), **body)
    assert response.status_code == 400 and needle in response.json()["error"], response.json()
    assert not response.json()["error"].startswith("error:")


def test_the_console_keys_page_is_for_owners_and_admins_only(world):
    from django.test import Client

    bob, alice = Client(), Client()
    bob.force_login(world.bob)
    alice.force_login(world.alice)
    assert b'href="/keys/"' not in bob.get("/").content and b'href="/keys/"' in alice.get("/").content
    assert bob.get("/keys/").status_code == 403
    assert bob.post("/keys/", {"name": "x"}).status_code == 403
    page = alice.get("/keys/").content.decode()
    assert "alice-rw" in page and "acme-ro" in page and "charlie-rw" not in page
    refused = alice.post("/keys/", {"name": "x", "kb": ["secret"]})
    assert refused.status_code == 400 and "Unknown knowledge base: secret." in refused.content.decode()


def test_a_tenant_key_is_told_it_cannot_read_the_installations_metrics(world, settings):
    settings.LOCI_METRICS_TOKEN = "metrics-secret"
    response = api_client(world.alice_key).get("/metrics")
    assert response.status_code == 401 and "scoped to one tenant" in response.json()["error"]
    assert api_client("metrics-secret").get("/metrics").status_code == 200
