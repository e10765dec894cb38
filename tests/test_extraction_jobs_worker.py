"""Extraction jobs with real processes: a request process that queues, a Celery worker killed while its job
waits on a hung model endpoint, and a second worker that takes the job over. Nothing is lost, nothing is
written twice. The model is the local fake server (tests/fake_openai.py), in this test's process."""

import json
import time

import pytest

from tests.fake_openai import FakeOpenAI
from tests.worker_process import Worker, app_env, db_rows, install, manage, stop_milvus_lite, workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# Posts a 6-turn chat and flushes it through the REST API (Django's test client over the scenario's
# database: every request commits, and queues its job on commit), timing each request.
POST = """
import json, time
from django.test import Client
from tenants.models import ApiKey, Tenant
key = ApiKey.issue(Tenant.objects.get(slug="acme"), "t", can_write=True)[1]
client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
chat = ["I moved to Lisbon in January for a job at a robotics startup.", "Lisbon! How is the new job going?",
        "Great: I lead the team that builds the warehouse robots' navigation.", "Do you still climb?",
        "Yes, I climb at a gym in Alcantara every Tuesday evening.", "I started piano lessons on Saturdays."]
turns = [{"message_id": f"m{i}", "sender_id": ("ana", "ben")[i % 2], "content": text,
          "timestamp": f"2024-03-04T09:0{i}:00Z"} for i, text in enumerate(chat)]
assert client.get("/api/v1/memories").status_code == 200  # the process's first request loads the API: not timed
out = {}
for name, url, body in (("post", "/api/v1/memories", {"user_id": "u1", "session_id": "s1", "messages": turns}),
                        ("flush", "/api/v1/memories/flush", {"user_id": "u1", "session_id": "s1"})):
    started = time.monotonic()
    response = client.post(url, body, content_type="application/json")
    out[name] = {"code": response.status_code, "seconds": time.monotonic() - started, **response.json()}
print(json.dumps(out))
"""


def job_rows(url: str) -> dict[str, tuple]:
    return {row[0]: row[1:] for row in db_rows(url, "SELECT id, kind, status, attempts FROM memory_extractionjob")}


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
    return found


def test_a_job_held_by_a_killed_worker_is_finished_by_the_next_once(tmp_path):
    fake = FakeOpenAI().start()
    var = tmp_path / "var"
    lease = 3
    env = app_env(var, LOCI_LLM="1", LLM_DISABLED="0", OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY="test-key",
                  LLM_MODEL="fake-llm", LLM_TIMEOUT="30", LLM_MAX_RETRIES="0", LLM_FLUSH_DEADLINE_SECONDS="60",
                  LOCI_EXTRACTION_LEASE_SECONDS=str(lease), LOCI_SWEEP_INTERVAL_SECONDS="0.5",
                  LOCI_STALLED_QUEUE_SECONDS="5")
    database = f"sqlite:///{var / 'loci.sqlite3'}"
    fake.queue_delay("chat", 120.0, times=50)  # the model hangs: each call waits out LLM_TIMEOUT
    try:
        with workers() as started:
            install(env, "conversations")
            first = Worker(env, tmp_path / "w1.log", name="w1")
            started.append(first.start())
            first.wait_ready()

            sent = json.loads(manage(env, "shell", "-c", POST).stdout.strip().splitlines()[-1])
            assert (sent["post"]["code"], sent["flush"]["code"]) == (202, 202), sent
            assert sent["post"]["seconds"] < 1.0 and sent["flush"]["seconds"] < 1.0, sent

            # The first worker takes the POST's job and waits on the model; then the machine dies.
            wait_for(lambda: any(status == "running" for _, status, _ in job_rows(database).values()), 60,
                     "no job started")
            time.sleep(1.5)  # inside a model call, past a lease renewal
            first.kill()
            with fake._lock:
                fake._queues["chat"].clear()  # the model answers (errors) from now on: the rules finish the job

            second = Worker(env, tmp_path / "w2.log", name="w2")
            started.append(second.start())
            second.wait_ready()
            rows = wait_for(lambda: (r := job_rows(database)) and all(s == "done" for _, s, _ in r.values()) and r,
                            180, f"jobs not done: {job_rows(database)}\n{second.log()[-3000:]}")
    finally:
        fake.stop()
        stop_milvus_lite(var)

    assert sorted(kind for kind, _, _ in rows.values()) == ["accumulate", "flush"]
    assert max(attempts for _, _, attempts in rows.values()) == 2  # the dead worker's job was taken over
    assert db_rows(database, "SELECT count(*) FROM memory_message WHERE segment_id IS NULL") == [(0,)]
    episodes = db_rows(database, "SELECT segment_id, count(*) FROM memory_memory WHERE kind = 'episode' "
                                 "GROUP BY segment_id")
    assert episodes and all(count == 1 for _, count in episodes)  # one episode per MemCell: nothing twice
    modes = {mode for (mode,) in db_rows(database, "SELECT DISTINCT extraction_mode FROM memory_memory")}
    assert modes == {"deterministic"}, modes
