"""Editable memories with an append-only history: PATCH /memories/{id}, GET /memories/{id}/history,
history rows for document extraction and its re-runs, and an admin that cannot touch the log."""

import io

import pytest
from django.db import transaction
from django.test import Client

from ingest.actions import ingest_document, rerun_document
from memory.models import Memory, MemoryHistory
from ingest.tasks import run_inline
from tenants.access import permitted_scope
from tests.conftest import DOCS, api_client
from tests.test_conversation_api import index_ids, ingest, search

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")


@pytest.fixture
def alice(world):
    return api_client(world.alice_key)


def painting_fact():
    return Memory.objects.get(kind="atomic_fact", text__icontains="lake sunrise")


def history(client, memory_id, code=200):
    response = client.get(f"/api/v1/memories/{memory_id}/history")
    assert response.status_code == code, response.content
    return response.json()


def test_patching_the_text_reindexes_it_and_records_before_and_after(world, alice, committed):
    ingest(alice, committed)
    fact = painting_fact()
    response = committed(alice.patch, f"/api/v1/memories/{fact.pk}",
                         {"text": "Melanie painted a watercolour of a glacier in 2022."}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["text"] == "Melanie painted a watercolour of a glacier in 2022."
    assert [f["id"] for f in search(alice, "watercolour glacier", method="keyword")["episodes"][0]["atomic_facts"]] \
        == [str(fact.pk)]
    assert not any(str(fact.pk) == f["id"] for e in search(alice, "lake sunrise", method="keyword")["episodes"]
                   for f in e["atomic_facts"])
    events = history(alice, fact.pk)["history"]
    assert [e["event"] for e in events] == ["ADD", "UPDATE"]
    assert events[0]["before"] is None and "lake sunrise" in events[0]["after"]["text"]
    assert "lake sunrise" in events[1]["before"]["text"] and "glacier" in events[1]["after"]["text"]
    assert events[1]["actor"].startswith("key:") and events[0]["actor"].startswith("key:")


def test_patching_the_status_takes_it_out_of_the_indexes_and_back(world, alice, committed):
    ingest(alice, committed)
    fact = painting_fact()
    assert index_ids([fact], world.acme.pk) == ({f"memory:{fact.pk}"},) * 2
    response = committed(alice.patch, f"/api/v1/memories/{fact.pk}", {"status": "disabled"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "disabled"
    assert index_ids([fact], world.acme.pk) == (set(), set())
    both = committed(alice.patch, f"/api/v1/memories/{fact.pk}", {"status": "active", "text": "Melanie paints lakes."},
                     format="json")
    assert both.status_code == 200 and both.json()["status"] == "active"
    assert index_ids([fact], world.acme.pk) == ({f"memory:{fact.pk}"},) * 2
    events = history(alice, fact.pk)["history"]
    assert [(e["event"], e["before"] and e["before"]["status"], e["after"]["status"]) for e in events] == [
        ("ADD", None, "active"), ("UPDATE", "active", "disabled"), ("UPDATE", "disabled", "disabled"),
        ("UPDATE", "disabled", "active")]


@pytest.mark.parametrize("body, needle", [
    ({}, "Send 'text', 'status'"),
    ({"text": "   "}, "cannot be empty"),
    ({"text": "x" * 20_001}, "at most 20000"),
    ({"status": "superseded"}, "status"),
    ({"status": 7}, "status"),
])
def test_bad_patches_are_400_and_change_nothing(alice, committed, body, needle):
    ingest(alice, committed)
    fact = painting_fact()
    before = MemoryHistory.objects.count()
    response = alice.patch(f"/api/v1/memories/{fact.pk}", body, format="json")
    assert response.status_code == 400, response.content
    assert needle in response.json()["error"]
    assert MemoryHistory.objects.count() == before and painting_fact().text == fact.text


def test_another_tenant_and_readers_cannot_patch_or_read_the_history(world, alice, committed):
    ingest(alice, committed)
    fact = painting_fact()
    charlie = api_client(world.charlie_key)
    assert charlie.patch(f"/api/v1/memories/{fact.pk}", {"text": "mine"}, format="json").status_code == 404
    history(charlie, fact.pk, 404)
    assert api_client(world.acme_ro_key).patch(f"/api/v1/memories/{fact.pk}", {"text": "no"},
                                               format="json").status_code == 403
    assert len(history(api_client(world.acme_ro_key), fact.pk)["history"]) == 1  # a reader may read it
    assert painting_fact().text == fact.text


def test_the_history_outlives_a_delete_but_only_for_callers_of_every_kb(world, alice, committed):
    from tenants.models import ApiKey

    ingest(alice, committed)
    fact = painting_fact()
    _, limited = ApiKey.issue(world.acme, "docs-only", can_write=True)
    ApiKey.objects.get(name="docs-only").knowledge_bases.set([world.docs])
    assert len(history(api_client(limited), fact.pk)["history"]) == 1  # the fact is in docs
    assert committed(alice.delete, f"/api/v1/memories/{fact.pk}").status_code == 200
    events = history(alice, fact.pk)["history"]
    assert [e["event"] for e in events] == ["ADD", "DELETE"]
    assert events[1]["after"] is None and "lake sunrise" in events[1]["before"]["text"]
    history(api_client(limited), fact.pk, 404)  # gone: its KB cannot be checked any more


def test_document_extraction_and_its_rerun_write_history(world, committed):
    scope = permitted_scope(world.alice, write=True)
    original = (DOCS / "fake-text.txt").read_bytes()
    with transaction.atomic():
        upload = ingest_document(scope, world.docs, io.BytesIO(original), "fake-text.txt")
    document = run_inline(upload.document.pk)
    assert document.status == "ready", document.error
    memories = {m.pk: m.text for m in document.memories.all()}
    assert memories
    adds = MemoryHistory.objects.filter(memory_id__in=memories, event="ADD")
    assert {h.memory_id for h in adds} == set(memories) and {h.actor for h in adds} == {"extraction"}
    # Someone corrects a fact; a re-run puts the extracted text back, and the log says so.
    fact = document.memories.filter(kind="atomic_fact").first()
    Memory.objects.filter(pk=fact.pk).update(text="hand-edited")
    with transaction.atomic():
        rerun_document(scope, document)
    assert run_inline(document.pk).status == "ready"
    assert MemoryHistory.objects.filter(memory_id__in=memories).count() == len(memories) + 1
    update = MemoryHistory.objects.get(memory_id=fact.pk, event="UPDATE")
    assert (update.old_text, update.new_text) == ("hand-edited", memories[fact.pk])


def test_the_admin_cannot_add_change_or_delete_history_rows(world, alice, committed):
    from django.contrib.auth import get_user_model

    ingest(alice, committed)
    row = MemoryHistory.objects.first()
    root = get_user_model().objects.create_superuser("root", password="root-pw-1")
    staff = Client()
    staff.force_login(root)
    assert staff.get("/admin/memory/memoryhistory/").status_code == 200  # it can be read
    assert staff.get("/admin/memory/memoryhistory/add/").status_code == 403
    assert staff.post(f"/admin/memory/memoryhistory/{row.pk}/delete/", {"post": "yes"}).status_code == 403
    staff.post("/admin/memory/memoryhistory/", {"action": "delete_selected", "_selected_action": [row.pk],
                                                "post": "yes"})
    assert staff.post(f"/admin/memory/memoryhistory/{row.pk}/change/", {"event": "ADD"}).status_code == 403
    assert MemoryHistory.objects.filter(pk=row.pk).exists()
    assert (MemoryHistory.objects.get(pk=row.pk).event, MemoryHistory.objects.get(pk=row.pk).old_text) == \
        (row.event, row.old_text)
