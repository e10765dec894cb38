"""Extraction off the request path: with an LLM configured, POST /memories and /memories/flush answer at
once with a job (202) whose status a client polls; the worker's task (run here as Celery runs it, in
this process) extracts; `wait` keeps the synchronous answer. Against a hung model endpoint (the local
fake server), so a request that ran the model's steps would be held for the flush's deadline."""

import time
from datetime import datetime, timedelta, timezone

import pytest
from django.utils import timezone as django_time

from conversations.tasks import run_extraction_job, sweep_extraction_jobs
from memory.models import ExtractionJob, Memory, Message
from tests.conftest import api_client
from tests.fake_openai import fake_openai  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")

T0 = datetime(2024, 3, 4, 9, 0, tzinfo=timezone.utc)
CHAT = [
    ("Ana", "I moved to Lisbon in January for a job at a robotics startup."),
    ("Ben", "Lisbon! How is the new job going?"),
    ("Ana", "Great: I lead the team that builds the warehouse robots' navigation."),
    ("Ben", "That sounds demanding. Do you still have time for climbing?"),
    ("Ana", "Yes, I climb at a gym in Alcantara every Tuesday evening."),
    ("Ben", "Nice, I started taking piano lessons on Saturdays."),
]
# The flush's LLM steps may take this long before the rules finish the extraction.
DEADLINE = 2.0


def turns(prefix="m"):
    return [{"message_id": f"{prefix}{i}", "sender_name": who, "sender_id": who.lower(), "content": text,
             "timestamp": (T0 + timedelta(minutes=i)).isoformat()} for i, (who, text) in enumerate(CHAT)]


@pytest.fixture
def alice(world):
    return api_client(world.alice_key)


@pytest.fixture
def hung_model(fake_openai, settings):
    """Every chat call answers only after a minute: past the client's timeout, every time."""
    settings.LLM_TIMEOUT = 1.0
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_FLUSH_DEADLINE_SECONDS = DEADLINE
    fake_openai.queue_delay("chat", 60.0, times=200)
    return fake_openai


def timed_post(client, url, body):
    started = time.monotonic()
    response = client.post(url, body, format="json")
    return response, time.monotonic() - started


def run_worker_task(job_id):
    """What a worker does with the queued message: Celery runs the real task (here, in this process)."""
    return run_extraction_job.apply(args=[job_id]).get()


def test_a_flush_answers_at_once_and_its_job_later_holds_the_answer(alice, world, hung_model):
    # The process's first request loads the API's modules and the schema check's schema: not timed.
    assert alice.get("/api/v1/memories").status_code == 200
    body = {"user_id": "u1", "session_id": "s1", "messages": turns()}
    posted, posting = timed_post(alice, "/api/v1/memories", body)
    assert posted.status_code == 202, posted.content
    assert posted.json()["status"] == "queued" and posted.json()["message_count"] == len(CHAT)
    flushed, flushing = timed_post(alice, "/api/v1/memories/flush", {"user_id": "u1", "session_id": "s1"})
    assert flushed.status_code == 202, flushed.content
    assert posting < 1.0 and flushing < 1.0, (posting, flushing)
    job = flushed.json()
    assert job["status_url"] == f"/api/v1/memories/jobs/{job['job_id']}"
    assert Memory.objects.count() == 0  # nothing extracted in the requests

    pending = alice.get(job["status_url"]).json()
    assert (pending["status"], pending["kind"], pending["result"]) == ("pending", "flush", None)

    # The worker runs the POST's job, then the flush's: the rules finish what the hung model could not.
    assert run_worker_task(posted.json()["job_id"]) == "done"
    started = time.monotonic()
    assert run_worker_task(job["job_id"]) == "done"
    assert time.monotonic() - started < DEADLINE + 10  # the flush's deadline held in the worker too
    done = alice.get(job["status_url"]).json()
    assert done["status"] == "done" and done["finished_at"] and done["error"] is None
    extracted = [done["result"], alice.get(posted.json()["status_url"]).json()["result"]]
    assert sum(r.get("episodes", 0) for r in extracted) >= 1
    assert any(r["status"] == "extracted" for r in extracted)
    listed = alice.get("/api/v1/memories", {"user_id": "u1"}).json()["results"]
    assert listed and {m["extraction_mode"] for m in listed} == {"deterministic"}
    assert not Message.objects.filter(session_id="s1", segment_id__isnull=True).exists()


def test_wait_extracts_in_the_request_and_answers_as_before(alice, hung_model):
    body = {"user_id": "u1", "session_id": "s1", "messages": turns(), "wait": True}
    posted = alice.post("/api/v1/memories", body, format="json")
    assert posted.status_code == 200, posted.content
    assert posted.json()["status"] in ("accumulated", "extracted") and posted.json()["kb"] == "docs"

    started = time.monotonic()
    flushed = alice.post("/api/v1/memories/flush?wait=true", {"user_id": "u1", "session_id": "s1", "timeout": 1},
                         format="json")
    assert flushed.status_code == 200, flushed.content
    assert time.monotonic() - started < 1 + 10  # held for the asked timeout, then the rules
    answer = flushed.json()
    assert answer["status"] == "extracted" and answer["episodes"] >= 1
    assert ExtractionJob.objects.get(pk=answer["job_id"]).status == "done"
    assert set(Memory.objects.values_list("extraction_mode", flat=True)) == {"deterministic"}


def test_a_redelivered_job_writes_nothing_twice(alice, hung_model):
    alice.post("/api/v1/memories", {"user_id": "u1", "session_id": "s1", "messages": turns(), "wait": True},
               format="json")
    job = alice.post("/api/v1/memories/flush", {"user_id": "u1", "session_id": "s1"}, format="json").json()
    assert run_worker_task(job["job_id"]) == "done"
    written = sorted(Memory.objects.values_list("id", flat=True))
    assert written

    assert run_worker_task(job["job_id"]) is None  # the message again: the job is done, nothing runs
    assert sorted(Memory.objects.values_list("id", flat=True)) == written
    assert ExtractionJob.objects.get(pk=job["job_id"]).attempts == 1


def test_a_job_whose_worker_died_is_taken_over_and_one_alive_is_left_alone(alice, hung_model, settings):
    alice.post("/api/v1/memories", {"user_id": "u1", "session_id": "s1", "messages": turns(), "wait": True},
               format="json")
    job_id = alice.post("/api/v1/memories/flush", {"user_id": "u1", "session_id": "s1"}, format="json").json()["job_id"]
    job = ExtractionJob.objects.get(pk=job_id)
    assert job.claim(settings.LOCI_EXTRACTION_LEASE_SECONDS)  # a worker took it ...

    assert run_worker_task(job_id) is None  # ... and, alive, keeps it: a second message finds it held
    assert sweep_extraction_jobs() == []
    assert ExtractionJob.objects.get(pk=job_id).status == "running"

    # ... then died: its lease runs out; the sweeper sends the job again and the next worker extracts.
    stale = django_time.now() - timedelta(seconds=settings.LOCI_EXTRACTION_LEASE_SECONDS + 1)
    ExtractionJob.objects.filter(pk=job_id).update(updated_at=stale)
    assert sweep_extraction_jobs() == [job_id]
    assert run_worker_task(job_id) == "done"
    after = ExtractionJob.objects.get(pk=job_id)
    assert after.attempts == 2 and after.result["status"] == "extracted"
    assert not job.finish({"status": "late"})  # the dead holder's answer, had it woken, is refused
    assert not Message.objects.filter(session_id="s1", segment_id__isnull=True).exists()

    # A week later its answer has been read: the sweeper deletes it.
    ExtractionJob.objects.filter(pk=job_id).update(finished_at=django_time.now() - timedelta(days=8))
    assert sweep_extraction_jobs() == [] and not ExtractionJob.objects.filter(pk=job_id).exists()


def test_a_job_is_read_only_by_its_tenant(alice, world, hung_model):
    alice.post("/api/v1/memories", {"user_id": "u1", "session_id": "s1", "messages": turns()}, format="json")
    job = alice.post("/api/v1/memories/flush", {"user_id": "u1", "session_id": "s1"}, format="json").json()
    assert api_client(world.charlie_key).get(job["status_url"]).status_code == 404
    assert api_client(world.acme_ro_key).get(job["status_url"]).json()["status"] == "pending"


def test_a_second_flush_while_one_waits_answers_the_same_job(alice, hung_model):
    alice.post("/api/v1/memories", {"user_id": "u1", "session_id": "s1", "messages": turns()}, format="json")
    first = alice.post("/api/v1/memories/flush", {"user_id": "u1", "session_id": "s1"}, format="json").json()
    second = alice.post("/api/v1/memories/flush", {"user_id": "u1", "session_id": "s1"}, format="json").json()
    assert first["job_id"] == second["job_id"]


@pytest.mark.parametrize("query, body, reason", [
    ("?wait=maybe", {}, "wait"),
    ("", {"wait": True, "timeout": 100000}, "timeout"),
    ("", {"wait": True, "timeout": 0}, "timeout"),
])
def test_a_bad_wait_is_refused_with_a_reason(alice, hung_model, query, body, reason):
    response = alice.post(f"/api/v1/memories/flush{query}", {"user_id": "u1", "session_id": "s1", **body},
                          format="json")
    assert response.status_code == 400 and reason in response.content.decode(), response.content


def test_without_a_model_a_flush_still_answers_in_the_request(alice):
    alice.post("/api/v1/memories", {"user_id": "u1", "session_id": "s1", "messages": turns()}, format="json")
    flushed = alice.post("/api/v1/memories/flush", {"user_id": "u1", "session_id": "s1"}, format="json")
    assert flushed.status_code == 200 and flushed.json()["status"] == "extracted"
    assert not ExtractionJob.objects.exists()


def test_the_queue_can_be_asked_for_without_a_model(alice, settings):
    settings.LOCI_ASYNC_EXTRACTION = "always"
    alice.post("/api/v1/memories", {"user_id": "u1", "session_id": "s1", "messages": turns()}, format="json")
    flushed = alice.post("/api/v1/memories/flush", {"user_id": "u1", "session_id": "s1"}, format="json")
    assert flushed.status_code == 202
    assert run_worker_task(flushed.json()["job_id"]) == "done"
    assert alice.get(flushed.json()["status_url"]).json()["result"]["status"] in ("extracted", "no_extraction")


def test_a_failed_extraction_says_why_and_leaves_its_turns_pending(alice, hung_model, settings):
    from retrieval.embeddings import reset_embedder

    settings.LOCI_EMBEDDER = "openai"  # the fake server's embeddings, which now fail every time
    settings.EMBEDDING_TIMEOUT = 1.0
    reset_embedder()
    hung_model.queue_error("embeddings", 500, "embedding server down", times=500)
    alice.post("/api/v1/memories", {"user_id": "u1", "session_id": "s1", "messages": turns()}, format="json")
    failed = alice.post("/api/v1/memories/flush", {"user_id": "u1", "session_id": "s1", "wait": True, "timeout": 1},
                        format="json")
    assert failed.status_code == 503, failed.content
    assert "The extraction failed" in failed.json()["error"]
    job = ExtractionJob.objects.get(kind="flush")
    assert job.status == "failed" and job.error
    assert alice.get(f"/api/v1/memories/jobs/{job.pk}").json()["error"] == job.error
    assert Message.objects.filter(session_id="s1", segment_id__isnull=True).count() == len(CHAT)


def test_a_queued_job_keeps_what_the_model_wrote(alice, fake_openai):  # noqa: F811
    from tests.test_agent_cases import CASE_PROMPT_WORDS, GERMAN
    from tests.test_agent_cases import turns as agent_turns

    fake_openai.queue_json_for(CASE_PROMPT_WORDS, {
        "task": "Repair the failing date tests.", "outcome": "Weeks start on Monday and all date tests pass.",
        "steps": [{"text": "Run the date tests", "tool": "run_tests", "messages": [2, 3], "error": "fails"}],
        "evidence": [{"kind": "user_positive", "message": 7, "text": "Super, danke!"}]})
    body = {"user_id": "u1", "session_id": "de", "agent_id": "dev-bot", "messages": agent_turns("de", GERMAN)}
    assert alice.post("/api/v1/memories", body, format="json").status_code == 202
    flushed = alice.post("/api/v1/memories/flush", {"user_id": "u1", "session_id": "de"}, format="json").json()
    assert flushed["status"] == "queued" and not Memory.objects.exists()

    assert run_worker_task(flushed["job_id"]) == "done"
    assert alice.get(flushed["status_url"]).json()["result"]["episodes"] >= 1
    case = alice.get("/api/v1/memories", {"user_id": "u1", "agent_id": "dev-bot",
                                          "memory_type": "agent_case"}).json()["results"]
    assert [(c["extraction_mode"], "Repair the failing date tests" in c["text"]) for c in case] == [("llm", True)]
