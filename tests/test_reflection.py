"""The reflection pass (`manage.py reflect`, the worker task) on real indexes: merges near-duplicate facts
with history, expires foresight past its window, refreshes skills, rebuilds profiles with --all;
running it twice changes nothing and nothing a person wrote is lost."""

import json
import uuid
from datetime import datetime, timedelta, timezone
from io import StringIO

import pytest
from django.core.management import call_command

from conversations.tasks import reflect_memories
from loci.celery import app
from memory.models import Memory, MemoryHistory
from retrieval.projection import index_memories
from tests.conftest import api_client

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")

T0 = datetime(2024, 2, 1, 18, 0, tzinfo=timezone.utc)
CHAT = [("Maya", "I work as a nurse at the city hospital."),
        ("Maya", "My daughter Lena started violin lessons this winter."),
        ("Maya", "I am allergic to peanuts, so I never order satay.")]


@pytest.fixture
def alice(world):
    return api_client(world.alice_key)


def run(*args) -> dict:
    out = StringIO()
    call_command("reflect", *args, stdout=out)
    return json.loads(out.getvalue())


def copy_of(fact: Memory, **changes) -> Memory:
    """A second row of a fact, as a lost race or a crash between two flushes leaves one."""
    twin = Memory.objects.create(**{**{f.attname: getattr(fact, f.attname) for f in Memory._meta.concrete_fields},
                                    "id": uuid.uuid4(), **changes})
    index_memories([twin])
    return twin


@pytest.fixture
def remembered(alice, committed):
    messages = [{"message_id": f"m{i}", "sender_name": who, "sender_id": who.lower(), "content": text,
                 "timestamp": (T0 + timedelta(minutes=i)).isoformat()} for i, (who, text) in enumerate(CHAT)]
    committed(alice.post, "/api/v1/memories", {"user_id": "maya", "session_id": "s1", "messages": messages},
              format="json")
    committed(alice.post, "/api/v1/memories/flush", {"user_id": "maya", "session_id": "s1"}, format="json")
    return Memory.objects.filter(kind="atomic_fact", user_id="maya")


def found_ids(client, query):
    body = client.post("/api/v1/memories/search", {"query": query, "method": "keyword", "top_k": 50,
                                                   "filters": {"user_id": "maya"}}, format="json").json()
    return {f["id"] for e in body["episodes"] for f in e["atomic_facts"]} | {e["id"] for e in body["episodes"]}


def test_reflection_merges_duplicates_with_history_and_twice_changes_nothing(alice, remembered, committed):
    nurse = next(f for f in remembered if "nurse" in f.text)
    twin = copy_of(nurse, source_message_ids=["m9"], created_at=nurse.created_at + timedelta(seconds=5))
    edited = copy_of(nurse, text=nurse.text + " ", created_at=nurse.created_at + timedelta(seconds=9))
    MemoryHistory.objects.create(memory_id=edited.pk, tenant_id=edited.tenant_id, event="UPDATE",
                                 old_text="Maya: I work as a nurse.", new_text=edited.text, actor="alice")
    window = {"valid_from": "2024-02-01T00:00:00+00:00", "valid_until": "2024-02-08T00:00:00+00:00"}
    gone = Memory.objects.create(tenant=nurse.tenant, kb=nurse.kb, kind="foresight", user_id="maya",
                                 text="Maya has a night shift next week.", metadata=window)
    assert str(twin.pk) in found_ids(alice, "nurse city hospital")

    report = run("--budget", "60")
    assert report["merged_facts"] == 1 and report["foresight_expired"] == 1 and report["complete"]
    twin.refresh_from_db(), nurse.refresh_from_db(), edited.refresh_from_db(), gone.refresh_from_db()
    assert twin.status == "superseded" and twin.superseded_by_id == nurse.pk  # kept, not deleted
    assert edited.status == "active"  # what a person wrote is never merged away
    assert "m9" in nurse.source_message_ids
    assert gone.status == "disabled"
    history = alice.get(f"/api/v1/memories/{twin.pk}/history").json()["history"]
    assert any("reflection: merged into" in (h.get("reason") or "") for h in history)
    assert str(twin.pk) not in found_ids(alice, "nurse city hospital")
    assert str(nurse.pk) in found_ids(alice, "nurse city hospital")

    rows = (MemoryHistory.objects.count(), sorted(Memory.objects.values_list("pk", "status", "text", "metadata")))
    again = run("--all")
    assert again["merged_facts"] == 0 and again["foresight_expired"] == 0 and again["skills_refreshed"] == 0
    twice = run("--all")
    assert twice["profiles_rebuilt"] == again["profiles_rebuilt"]
    after_first_rebuild = (MemoryHistory.objects.count(), sorted(Memory.objects.values_list("pk", "status", "text",
                                                                                             "metadata")))
    run("--all")
    assert (MemoryHistory.objects.count(), sorted(Memory.objects.values_list("pk", "status", "text", "metadata"))) \
        == after_first_rebuild
    assert rows[0] <= after_first_rebuild[0]


def test_reflect_all_rebuilds_lost_profiles(alice, remembered):
    profile = Memory.objects.filter(kind="profile", user_id="maya")
    before = sorted(profile.values_list("pk", "text"))
    assert before, "the chat states an occupation and an allergy"
    Memory.objects.filter(kind="profile").delete()  # a crash between a commit and its re-derivation
    assert run("--all", "--user-id", "maya")["profiles_rebuilt"] == 1
    assert sorted(profile.values_list("pk", "text")) == before


def test_the_worker_task_runs_a_bounded_pass(remembered):
    report = reflect_memories(budget_seconds=0.0)  # spent at once: says where it stopped
    assert report["complete"] is False and report["not_reached"][0]["user_id"] == "maya"
    assert reflect_memories(budget_seconds=60.0)["complete"] is True


def test_the_task_keeps_the_name_beat_schedules_and_queued_messages_use():
    # It moved from ingest.tasks to conversations.tasks; a message queued before the move names the old path.
    assert reflect_memories.name == "ingest.tasks.reflect_memories"
    assert app.tasks["ingest.tasks.reflect_memories"].run is reflect_memories.run

def test_up_s_clock_queues_the_pass_every_interval():
    """`up` queues the reflection task every LOCI_REFLECT_INTERVAL_SECONDS (no Celery beat needed), the first
    one interval after its start; 0 is off. (What the task does is tested above.)"""
    import threading
    import time

    from conversations import reflection_timer

    assert reflection_timer.start(interval=0) is None
    ticks, stop = [], threading.Event()

    def queue():
        ticks.append(time.monotonic())
        if len(ticks) == 3:
            stop.set()
        if len(ticks) == 2:
            raise ConnectionError("the broker is down for this tick")  # the clock goes on

    started = time.monotonic()
    thread = reflection_timer.start(interval=0.2, queue=queue, stop=stop)
    thread.join(timeout=30)
    assert not thread.is_alive() and len(ticks) == 3
    assert ticks[0] - started >= 0.2 and all(b - a >= 0.19 for a, b in zip(ticks, ticks[1:]))
