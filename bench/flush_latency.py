"""Flush latency of a small chat with the rules alone: in the request, or through the queue (issue 37 item 2).

    python -m bench.flush_latency [SESSIONS]

Starts this checkout's `manage.py up --concurrency 1` (uvicorn and one worker) over a var dir of its own,
once per mode: LOCI_ASYNC_EXTRACTION=never (the flush extracts in the request) and =always (the flush
answers 202 and a client polls the job every 50 ms, as loci_client's wait does at first), the latter
with the filesystem broker's default poll (1 s) and with LOCI_BROKER_POLL_SECONDS=0.1. Each session
posts a 6-turn chat (waiting for the POST's own job, if any), then times the flush to its answer.
"""

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
CHAT = [
    ("Ana", "I moved to Lisbon in January for a job at a robotics startup."),
    ("Ben", "Lisbon! How is the new job going?"),
    ("Ana", "Great: I lead the team that builds the warehouse robots' navigation."),
    ("Ben", "That sounds demanding. Do you still have time for climbing?"),
    ("Ana", "Yes, I climb at a gym in Alcantara every Tuesday evening."),
    ("Ben", "Nice, I started taking piano lessons on Saturdays."),
]
SETUP = """
import json
from tenants.models import ApiKey, KnowledgeBase, Tenant
acme = Tenant.objects.create(slug="acme", name="Acme")
KnowledgeBase.objects.create(tenant=acme, slug="conversations", name="Conversations")
print(json.dumps(ApiKey.issue(acme, "bench", can_write=True)[1]))
"""


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _settled(client: httpx.Client, response: httpx.Response) -> dict:
    """The answer: the response's own (200), or the job's result once done (202, polled every 50 ms)."""
    body = response.json()
    if response.status_code != 202:
        return body
    while True:
        job = client.get(body["status_url"]).json()
        if job["status"] in ("done", "failed"):
            assert job["status"] == "done", job
            return job["result"]
        time.sleep(0.05)


def run(mode: str, poll: str | None, sessions: int) -> dict:
    var = tempfile.mkdtemp(prefix=f"bench-flush-{mode}-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCI_", "MILVUS_", "DJANGO_", "CELERY_",
                                                                    "EMBEDDING_", "LLM_", "OPENAI_"))}
    port = _free_port()
    env.update(LOCI_VAR_DIR=var, LOCI_PORT=str(port), MILVUS_LITE_PORT=str(_free_port()), LOCI_ASYNC_EXTRACTION=mode,
               EMBEDDING_CACHE_PATH=f"{var}/embedding-cache.sqlite3", LOCI_RATE_LIMIT_USER="off",
               LOCI_MODELS_DIR=os.environ.get("LOCI_MODELS_DIR", str(REPO / "var" / "models")))
    if poll:
        env["LOCI_BROKER_POLL_SECONDS"] = poll

    def manage(*args):
        return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, check=True,
                              capture_output=True, text=True).stdout

    manage("migrate", "--no-input", "-v", "0")
    key = json.loads(manage("shell", "-c", SETUP).strip().splitlines()[-1])
    log_path = Path(var) / "up.log"
    with open(log_path, "wb") as log:
        up = subprocess.Popen([sys.executable, "manage.py", "up", "--concurrency", "1"], cwd=REPO, env=env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while "Loci is up" not in log_path.read_text() or " ready." not in log_path.read_text():
            assert up.poll() is None, log_path.read_text()[-3000:]
            time.sleep(0.5)
        flushes, posts = [], []
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"},
                          timeout=120) as client:
            for n in range(sessions + 2):  # the first two warm the embedder in the web process and the worker
                turns = [{"message_id": f"s{n}-{i}", "sender_name": who, "sender_id": who.lower(), "content": text,
                          "timestamp": f"2024-03-0{1 + n % 9}T09:{i:02d}:00Z"} for i, (who, text) in enumerate(CHAT)]
                started = time.monotonic()
                posted = client.post("/api/v1/memories", json={"user_id": "u1", "session_id": f"s{n}",
                                                               "messages": turns})
                posting = time.monotonic() - started
                _settled(client, posted)
                started = time.monotonic()
                answer = _settled(client, client.post("/api/v1/memories/flush",
                                                      json={"user_id": "u1", "session_id": f"s{n}"}))
                if n >= 2:
                    flushes.append(time.monotonic() - started)
                    posts.append(posting)
                assert answer["status"] in ("extracted", "no_extraction"), answer
        return {"mode": mode, "broker_poll_s": poll or "1.0 (default)", "sessions": sessions,
                "flush_median_ms": round(statistics.median(flushes) * 1000),
                "flush_max_ms": round(max(flushes) * 1000),
                "post_median_ms": round(statistics.median(posts) * 1000)}
    finally:
        os.killpg(up.pid, signal.SIGTERM)
        up.wait(60)


def main(sessions: int = 10) -> None:
    for mode, poll in (("never", None), ("always", None), ("always", "0.1")):
        print(json.dumps(run(mode, poll, sessions)), flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
