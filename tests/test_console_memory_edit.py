"""A memory's history and its edit form in the console: the same rows and the same action as
`GET /memories/{id}/history` and `PATCH /memories/{id}`, with the console user as the actor."""

import re

import pytest
from django.test import Client

from memory.models import Memory, MemoryHistory
from tests.browser_fixtures import PROCESSING_TIMEOUT_MS, shot, sign_in
from tests.conftest import api_client
from tests.test_conversation_api import index_ids, ingest, search


def client_for(user, **kwargs):
    client = Client(**kwargs)
    client.force_login(user)
    return client


@pytest.fixture
def fact(world, committed, lite_vector_settings):
    ingest(api_client(world.alice_key), committed)
    return Memory.objects.get(kind="atomic_fact", text__icontains="lake sunrise")


def test_an_edit_reindexes_the_memory_and_its_history_names_the_console_user(world, fact, committed):
    alice = client_for(world.alice)
    page = alice.get(f"/memories/{fact.pk}/edit/")
    assert page.status_code == 200 and "lake sunrise" in page.content.decode()
    response = committed(alice.post, f"/memories/{fact.pk}/edit/",
                         {"text": "Melanie painted a watercolour of a glacier in 2022.", "status": "active"})
    assert response.status_code == 302 and response["Location"] == f"/memories/{fact.pk}/history/"
    key = api_client(world.alice_key)
    found = search(key, "watercolour glacier", method="keyword")["episodes"][0]["atomic_facts"]
    assert [f["id"] for f in found] == [str(fact.pk)]
    row = MemoryHistory.objects.filter(memory_id=fact.pk).order_by("-created_at", "-id").first()
    assert (row.event, row.actor, row.reason) == ("UPDATE", "user:alice", "edited through the console")
    history = alice.get(f"/memories/{fact.pk}/history/").content.decode()
    assert "user:alice" in history and "lake sunrise" in history and "watercolour of a glacier" in history
    # The console's rows are the API's rows.
    api = key.get(f"/api/v1/memories/{fact.pk}/history").json()["history"]
    assert [e["event"] for e in api] == ["ADD", "UPDATE"] and api[1]["actor"] == "user:alice"


def test_disabling_in_the_console_takes_it_out_of_the_indexes(world, fact, committed):
    assert index_ids([fact], world.acme.pk) == ({f"memory:{fact.pk}"},) * 2
    response = committed(client_for(world.alice).post, f"/memories/{fact.pk}/edit/",
                         {"text": fact.text, "status": "disabled"})
    assert response.status_code == 302
    assert index_ids([fact], world.acme.pk) == (set(), set())
    fact.refresh_from_db()
    assert fact.status == "disabled"
    assert MemoryHistory.objects.filter(memory_id=fact.pk, new_status="disabled", actor="user:alice").count() == 1


def test_a_reader_sees_the_history_but_may_not_edit(world, fact):
    bob = client_for(world.bob)  # a viewer of acme
    assert bob.get(f"/memories/{fact.pk}/history/").status_code == 200
    assert 'href="/memories/' + str(fact.pk) + '/edit/"' not in bob.get("/memories/?kind=atomic_fact").content.decode()
    assert bob.get(f"/memories/{fact.pk}/edit/").status_code == 403
    assert bob.post(f"/memories/{fact.pk}/edit/", {"text": "Vandalised.", "status": "active"}).status_code == 403
    fact.refresh_from_db()
    assert "lake sunrise" in fact.text


def test_another_tenant_gets_404_for_the_history_and_the_edit(world, fact):
    charlie = client_for(world.charlie)
    assert charlie.get(f"/memories/{fact.pk}/history/").status_code == 404
    assert charlie.get(f"/memories/{fact.pk}/edit/").status_code == 404
    assert charlie.post(f"/memories/{fact.pk}/edit/", {"text": "Mine now.", "status": "active"}).status_code == 404
    assert client_for(world.alice).get("/memories/00000000-0000-0000-0000-000000000000/history/").status_code == 404


@pytest.mark.parametrize("body, needle", [
    ({"text": "   ", "status": "active"}, "cannot be empty"),
    ({"text": "x" * 20_001, "status": "active"}, "at most 20000"),
    ({"text": "Fine.", "status": "superseded"}, "Select a valid choice"),
])
def test_bad_input_is_a_form_error_and_changes_nothing(world, fact, body, needle):
    before = MemoryHistory.objects.count()
    response = client_for(world.alice).post(f"/memories/{fact.pk}/edit/", body)
    assert response.status_code == 400
    page = response.content.decode()
    assert needle in page and 'class="field-error"' in page
    fact.refresh_from_db()
    assert "lake sunrise" in fact.text and MemoryHistory.objects.count() == before


def test_the_edit_form_needs_the_csrf_token(world, fact):
    alice = client_for(world.alice, enforce_csrf_checks=True)
    assert alice.post(f"/memories/{fact.pk}/edit/", {"text": "No token.", "status": "active"}).status_code == 403
    form = alice.get(f"/memories/{fact.pk}/edit/")
    token = form.cookies["csrftoken"].value
    assert alice.post(f"/memories/{fact.pk}/edit/", {"text": "With a token.", "status": "active",
                                                     "csrfmiddlewaretoken": token}).status_code == 302


def test_the_memory_list_links_every_memory_to_its_history_and_edit(world, fact):
    page = client_for(world.alice).get("/memories/?kind=atomic_fact").content.decode()
    assert f'href="/memories/{fact.pk}/history/"' in page and f'href="/memories/{fact.pk}/edit/"' in page


@pytest.mark.slow
def test_in_the_browser_an_edit_shows_in_its_history_and_search_finds_the_new_text(console, browser, tmp_path):
    note = tmp_path / "heron-plan.txt"
    note.write_text("Heron launch plan.\n\nThe Heron launch takes place in Porto on 9 May.\n", encoding="utf-8")
    server = console.base
    acme = console.tenant()
    alice = sign_in(browser, server, acme.user, acme.password)
    alice.goto("/upload/")
    alice.set_input_files("#pick-files", [str(note)])
    alice.wait_for_selector('#upload-list .upload-item[data-state="ready"]', timeout=PROCESSING_TIMEOUT_MS)

    alice.goto("/memories/?kind=atomic_fact&q=Porto")
    card = alice.locator(".memory", has_text="Porto").first
    card.locator("[data-edit]").click()
    alice.wait_for_url(re.compile(r"/memories/[0-9a-f-]{36}/edit/$"))
    memory_id = alice.url.rsplit("/", 3)[-3]
    alice.fill("#id_text", "   ")
    alice.get_by_role("button", name="Save").click()
    assert "cannot be empty" in alice.locator(".field-error").inner_text()  # a form error, nothing saved
    alice.fill("#id_text", "The Heron launch takes place in Lisbon on 16 May.")
    shot(alice, "memory-edit")
    alice.get_by_role("button", name="Save").click()
    alice.wait_for_url(server + f"/memories/{memory_id}/history/")
    newest = alice.locator(".history-row").first
    assert newest.get_attribute("data-event") == "UPDATE"
    assert newest.locator(".history-actor").inner_text() == f"user:{acme.user}"
    assert "Porto" in newest.locator(".history-before").inner_text()
    assert "Lisbon" in newest.locator(".history-after").inner_text()
    assert alice.locator(".history-row").last.get_attribute("data-event") == "ADD"
    shot(alice, "memory-history")

    # Re-indexed at once: search finds the new text, and the old one no longer answers with this memory.
    alice.goto("/search/?q=Heron+launch+Lisbon&method=keyword")
    hit = alice.locator(".result", has_text="Lisbon on 16 May").first
    assert hit.count() == 1
    assert hit.locator(f'a[href="/memories/{memory_id}/history/"]').count() == 1
    alice.goto("/search/?q=Porto&method=keyword")
    assert alice.locator(f'.result a[href="/memories/{memory_id}/history/"]').count() == 0
    assert alice.js_errors == []


def test_a_deleted_memorys_history_stays_readable_with_its_delete_row(world, fact, committed):
    response = committed(api_client(world.alice_key).delete, f"/api/v1/memories/{fact.pk}")
    assert response.status_code == 200, response.content
    alice = client_for(world.alice)
    page = alice.get(f"/memories/{fact.pk}/history/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "This memory was deleted" in html and 'data-event="DELETE"' in html and "lake sunrise" in html
    assert f'/memories/{fact.pk}/edit/' not in html
    assert alice.get(f"/memories/{fact.pk}/edit/").status_code == 404
