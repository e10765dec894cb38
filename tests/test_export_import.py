"""Export and import: a tenant's memories with their history, sources and scopes travel as JSON Lines."""

import json

import pytest
from django.core.management import CommandError, call_command

from ingest.actions import ingest_document
from ingest.tasks import run_inline
from memory.models import Chunk, Document, Memory, MemoryHistory, Message
from portability.importer import ImportFailed, import_lines
from tenants.access import permitted_scope
from tenants.models import ApiKey, Tenant
from tests.conftest import api_client
from tests.test_conversation_api import ingest
from tests.worker_process import app_env, manage

pytestmark = pytest.mark.usefixtures("lite_vector_settings")


def export(client, **params):
    response = client.get("/api/v1/export", params)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/x-ndjson")
    return b"".join(response.streaming_content).decode().splitlines(keepends=True)


def records(lines, kind):
    return [json.loads(line) for line in lines if json.loads(line)["type"] == kind]


def search(key, query):
    response = api_client(key).post("/api/v1/memories/search", {"query": query, "filters": {"user_id": "u1"}},
                                    format="json")
    assert response.status_code == 200, response.content
    return json.dumps(response.json(), ensure_ascii=False)


def test_a_users_memories_round_trip_into_another_tenant_and_are_found(world, committed):
    alice = api_client(world.alice_key)
    ingest(alice, committed)
    ingest(alice, committed, user="u2", prefix="x")  # another user: not in u1's export
    fact = Memory.objects.filter(tenant=world.acme, user_id="u1", kind="atomic_fact").first()
    assert committed(alice.patch, f"/api/v1/memories/{fact.pk}", {"text": fact.text + " (checked)"},
                     format="json").status_code == 200

    lines = export(alice, user_id="u1")
    header = json.loads(lines[0])
    assert header["type"] == "loci-export" and header["tenant"] == "acme" and header["user_id"] == "u1"
    exported = records(lines, "memory")
    assert len(exported) == Memory.objects.filter(tenant=world.acme, user_id="u1").count() > 0
    assert {m["user_id"] for m in exported} == {"u1"}
    assert {m["user_id"] for m in records(lines, "message")} == {"u1"}
    assert any(h["event"] == "UPDATE" for h in records(lines, "history"))
    assert all(m["source_message_ids"] for m in exported if m["kind"] == "atomic_fact")

    initech = Tenant.objects.create(slug="initech", name="Initech")
    with pytest.raises(ImportFailed, match="--remap-ids"):  # the same installation holds these ids
        import_lines(lines, initech)
    assert not Memory.objects.filter(tenant=initech).exists()  # nothing half-imported

    counts = import_lines(lines, initech, remap_ids=True)
    assert counts["memory"]["created"] == len(exported) and counts["message"]["created"] == 6
    copied = Memory.objects.filter(tenant=initech)
    assert sorted(copied.values_list("text", flat=True)) == sorted(m["text"] for m in exported)
    assert not set(copied.values_list("id", flat=True)) & {m["id"] for m in exported}
    edited = copied.get(text=fact.text + " (checked)")
    history = MemoryHistory.objects.filter(memory_id=edited.pk).order_by("created_at", "id")
    assert [h.event for h in history] == ["ADD", "UPDATE"]
    assert edited.parent.tenant_id == initech.pk and edited.source_message_ids == fact.source_message_ids

    _, key = ApiKey.issue(initech, "reader")
    found = search(key, "When did Caroline go to the support group?")
    assert "support group" in found.lower()
    assert not any(m["id"] in found for m in exported)  # the copies answer, under their new ids

    again = import_lines(lines, initech, remap_ids=True)  # idempotent
    assert again["memory"]["created"] == 0 and again["message"]["created"] == 0 and again["history"]["created"] == 0
    assert Memory.objects.filter(tenant=initech).count() == len(exported)


def test_a_knowledge_base_with_its_documents_chunks_and_originals(world, tmp_path):
    scope = permitted_scope(world.alice, write=True)
    path = tmp_path / "memo.md"
    path.write_text("# Harbor project\n\nThe Harbor project moved its launch to March 14. Dana Reyes leads it.\n\n"
                    "## Budget\n\nThe budget for the Harbor project is 2.4 million euros.\n")
    with open(path, "rb") as fh:
        document = ingest_document(scope, world.docs, fh, "memo.md").document
    run_inline(document.pk)
    document.refresh_from_db()
    assert document.status == "ready"

    lines = export(api_client(world.alice_key), kb="docs", originals="1")
    assert [r["filename"] for r in records(lines, "original")] == ["memo.md"]
    assert api_client(world.alice_key).get("/api/v1/export", {"kb": "secret"}).status_code == 400  # globex's
    assert api_client(world.charlie_key).get("/api/v1/export").status_code == 200
    assert not records(export(api_client(world.charlie_key)), "memory")  # charlie sees none of acme

    initech = Tenant.objects.create(slug="initech", name="Initech")
    counts = import_lines(lines, initech, remap_ids=True)
    assert counts["document"]["created"] == 1 and counts["originals"] == 1
    copy = Document.objects.get(kb__tenant=initech)
    assert copy.kb.slug == "docs" and copy.status == "ready" and copy.original.read() == path.read_bytes()
    assert Chunk.objects.filter(document=copy).count() == Chunk.objects.filter(document=document).count()
    facts = Memory.objects.filter(tenant=initech, document=copy, kind="atomic_fact")
    assert facts.exists() and all(f.source_chunks.filter(document=copy).exists() for f in facts)

    _, key = ApiKey.issue(initech, "reader")
    found = api_client(key).post("/api/v1/memories/search", {"query": "Harbor budget", "memory_types": ["atomic_fact"]},
                                format="json")
    assert found.status_code == 200 and "2.4 million" in json.dumps(found.json())


@pytest.mark.parametrize("content, needle", [
    ("", "empty"),
    ('{"type": "memory"}\n', "header"),
    ('{"type": "loci-export", "version": 99}\n', "version 99"),
    ('{"type": "loci-export", "version": 1}\nnot json\n', "line 2: not JSON"),
    ('{"type": "loci-export", "version": 1}\n{"type": "chunk", "id": 1, "document_id": 5}\n', "line 2"),
    ('{"type": "loci-export", "version": 1}\n{"type": "bomb"}\n', "unknown record type"),
])
def test_a_bad_file_is_refused_with_its_line_and_imports_nothing(world, content, needle):
    with pytest.raises(ImportFailed, match=needle):
        import_lines(content.splitlines(keepends=True), world.globex)
    assert not Message.objects.filter(tenant=world.globex).exists()


@pytest.mark.slow
def test_an_export_is_imported_into_a_second_installation_and_searched(world, committed, tmp_path):
    alice = api_client(world.alice_key)
    ingest(alice, committed)
    path = tmp_path / "acme.jsonl"
    path.write_text("".join(export(alice)))

    env = app_env(tmp_path / "second")
    manage(env, "migrate", "--no-input", timeout=300)
    counts = json.loads(manage(env, "import", str(path), "--tenant", "acme", timeout=300).stdout)
    assert counts["memory"]["created"] == Memory.objects.filter(tenant=world.acme).count()
    found = manage(env, "search", "When did Caroline go to the support group?", "--tenant", "acme", "--json",
                   timeout=300).stdout
    assert "support group" in found.lower()
    again = json.loads(manage(env, "import", str(path), "--tenant", "acme", timeout=300).stdout)
    assert again["memory"]["created"] == 0


def test_a_refused_file_leaves_no_tenant_behind(db, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "loci-export", "version": 1}\n'
                    '{"type": "knowledge_base", "id": 1, "slug": "notes"}\nnot json\n')
    for _ in range(3):
        with pytest.raises(CommandError, match="line 3"):
            call_command("import", str(path), "--tenant", "newco", "--kb", "inbox")
    assert not Tenant.objects.filter(slug="newco").exists()


def test_a_memory_over_the_apis_text_limit_is_refused_with_its_line_before_anything_is_written(world):
    memory = {"type": "memory", "id": "6f1c1e51-0000-4000-8000-000000000001", "kb_id": 1, "kind": "atomic_fact",
              "text": "x" * (Memory.MAX_TEXT_CHARS + 1)}
    lines = ['{"type": "loci-export", "version": 1}\n',
             '{"type": "knowledge_base", "id": 1, "slug": "imported"}\n', json.dumps(memory) + "\n"]
    with pytest.raises(ImportFailed, match=f"line 3: .*at most {Memory.MAX_TEXT_CHARS} characters"):
        import_lines(lines, world.globex)
    assert not world.globex.knowledge_bases.filter(slug="imported").exists()
    assert not Memory.objects.filter(tenant=world.globex).exists()
