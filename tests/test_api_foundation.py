import pytest

from memory.models import Document
from tests.conftest import api_client

pytestmark = pytest.mark.usefixtures("api_schema_check")  # every response matches the OpenAPI schema


@pytest.mark.parametrize("path", ["/api/v1/tenants", "/api/v1/knowledge-bases", "/api/v1/documents"])
def test_anonymous_callers_are_refused(world, path):
    assert api_client().get(path).status_code in (401, 403)


def test_a_bad_bearer_key_is_refused(world):
    response = api_client("loci_abc_def").get("/api/v1/knowledge-bases")
    assert response.status_code == 401
    assert "Invalid" in response.json()["error"]


def test_tenants_lists_only_the_callers_tenant(world):
    slugs = [t["slug"] for t in api_client(user=world.alice).get("/api/v1/tenants").json()]
    assert slugs == ["acme"]
    slugs = [t["slug"] for t in api_client(world.charlie_key).get("/api/v1/tenants").json()]
    assert slugs == ["globex"]


def test_knowledge_bases_are_tenant_scoped(world):
    body = api_client(world.alice_key).get("/api/v1/knowledge-bases").json()
    assert sorted(kb["slug"] for kb in body["results"]) == ["docs", "notes"]
    body = api_client(world.charlie_key).get("/api/v1/knowledge-bases").json()
    assert [kb["slug"] for kb in body["results"]] == ["secret"]


def test_another_tenants_kb_is_not_found(world):
    assert api_client(world.alice_key).get("/api/v1/knowledge-bases/secret").status_code == 404
    assert api_client(world.charlie_key).delete("/api/v1/knowledge-bases/docs").status_code == 404
    assert world.docs.__class__.objects.filter(pk=world.docs.pk).exists()


def test_owner_creates_updates_and_deletes_a_kb(world):
    client = api_client(user=world.alice)
    created = client.post("/api/v1/knowledge-bases", {"slug": "faq", "name": "FAQ", "language": "zh"}, format="json")
    assert created.status_code == 201, created.json()
    assert client.patch("/api/v1/knowledge-bases/faq", {"name": "常见问题"}, format="json").json()["name"] == "常见问题"
    clash = client.post("/api/v1/knowledge-bases", {"slug": "faq", "name": "again"}, format="json")
    assert clash.status_code == 400 and "already exists" in clash.json()["error"]


def test_a_viewer_cannot_create_or_upload(world, tmp_path):
    client = api_client(user=world.bob)
    assert client.post("/api/v1/knowledge-bases", {"slug": "x", "name": "x"}, format="json").status_code == 403
    f = tmp_path / "a.txt"
    f.write_text("hello")
    with f.open("rb") as fh:
        assert client.post("/api/v1/documents", {"kb": "docs", "files": [fh]}, format="multipart").status_code == 403
    assert client.get("/api/v1/documents").status_code == 200


def _upload(client, kb, *paths):
    handles = [p.open("rb") for p in paths]
    try:
        return client.post("/api/v1/documents", {"kb": kb, "files": handles}, format="multipart")
    finally:
        for h in handles:
            h.close()


def test_upload_stores_originals_and_reports_duplicates(world, tmp_path, django_capture_on_commit_callbacks):
    a, b = tmp_path / "a.txt", tmp_path / "b.md"
    a.write_text("Alpha beta.")
    b.write_text("# Title\n\nGamma delta.")
    client = api_client(world.alice_key)
    with django_capture_on_commit_callbacks(execute=False):
        first = _upload(client, "docs", a, b)
    assert first.status_code == 201
    assert [r["duplicate"] for r in first.json()] == [False, False]
    doc = Document.objects.get(filename="a.txt")
    assert doc.status == "queued" and doc.size == 11 and len(doc.sha256) == 64
    assert doc.original.read() == b"Alpha beta."
    with django_capture_on_commit_callbacks(execute=False):
        again = _upload(client, "docs", a)
    assert again.status_code == 200 and again.json()[0]["duplicate"] is True
    assert Document.objects.filter(filename="a.txt").count() == 1
    download = client.get(f"/api/v1/documents/{doc.pk}/original")
    assert b"".join(download.streaming_content) == b"Alpha beta."


def test_upload_to_another_tenants_kb_is_refused(world, tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("x")
    response = _upload(api_client(world.alice_key), "secret", f)
    assert response.status_code == 400 and "Unknown knowledge base" in response.json()["error"]
    assert not Document.objects.exists()


def test_documents_of_another_tenant_are_invisible(world, tmp_path, django_capture_on_commit_callbacks):
    f = tmp_path / "a.txt"
    f.write_text("private")
    with django_capture_on_commit_callbacks(execute=False):
        _upload(api_client(world.charlie_key), "secret", f)
    doc = Document.objects.get()
    client = api_client(world.alice_key)
    assert client.get("/api/v1/documents").json()["count"] == 0
    for method, path in [("get", f"/api/v1/documents/{doc.pk}"), ("delete", f"/api/v1/documents/{doc.pk}"),
                         ("post", f"/api/v1/documents/{doc.pk}/rerun"), ("get", f"/api/v1/documents/{doc.pk}/original")]:
        assert getattr(client, method)(path).status_code == 404, (method, path)
    assert Document.objects.filter(pk=doc.pk).exists()


def test_read_only_key_cannot_delete(world, tmp_path, django_capture_on_commit_callbacks):
    f = tmp_path / "a.txt"
    f.write_text("keep me")
    with django_capture_on_commit_callbacks(execute=False):
        _upload(api_client(world.alice_key), "docs", f)
    doc = Document.objects.get()
    assert api_client(world.acme_ro_key).delete(f"/api/v1/documents/{doc.pk}").status_code == 403


def test_schema_and_docs_are_served(world):
    client = api_client(user=world.alice)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/documents" in schema.content
    assert client.get("/api/docs/").status_code == 200
