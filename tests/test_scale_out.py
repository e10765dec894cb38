"""The scale-out path against real servers: PostgreSQL, a Redis or RabbitMQ broker, a real worker process.

Every step is its own process driven only by environment variables, as on separate machines:
`manage.py migrate`, `bootstrap`, `ingest`, `search` and a `celery -A loci worker`, all pointed at a
fresh PostgreSQL database and a Redis database / RabbitMQ vhost of their own. The vector and keyword
indexes stay embedded (Milvus Lite server, SQLite FTS5) under the scenario's LOCI_VAR_DIR.

What proves the worker did the work: `ingest` without --wait cannot fall back to processing in its
own process, and the worker's log shows each document's task received and succeeded there (one task
runs a document's stages one after the other, ingest/tasks.py).
"""

import json
import re
import subprocess
import sys
import time

import pytest

from tests.conftest import DOCS
from tests.worker_process import (
    REPO, Worker, app_env, db_rows, manage, need_rabbitmqctl, need_service, postgres_database, rabbitmq_vhost,
    redis_database, stop_milvus_lite, workers,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # several workers, each waited for

FIRST = DOCS / "fake-text.txt"  # "Important points: - Hamburgers are delicious - Dogs are the best ..."
# Queued together on the Redis path to time one worker process (docs/scaling.md has the numbers).
BATCH = [DOCS / name for name in ("book-war-and-peace-1p.txt", "README.md", "fake-email.eml", "fake.docx")]
STAGES = 1  # tasks per document: one runs parse, extract and index in turn (a small file is far under CHAIN_SHARE)
TASK = r"Task ingest\.tasks\.process_document_stage\[[0-9a-f-]+\]"


def need(host: str, port: int, what: str) -> None:
    need_service(what, host, port)


@pytest.fixture
def broker_url(request):
    kind = request.param
    if kind == "redis":
        need("127.0.0.1", 6379, "Redis")
        with redis_database() as url:
            yield url
    else:
        need("127.0.0.1", 5672, "RabbitMQ")
        need_rabbitmqctl()
        with rabbitmq_vhost() as url:
            yield url


@pytest.fixture
def database_url():
    need("127.0.0.1", 5432, "PostgreSQL")
    with postgres_database() as url:
        yield url


def wait_for_log(worker: Worker, pattern: str, count: int, timeout: float = 30) -> int:
    """The log line for a task's success is written just after the task marks its document ready."""
    deadline = time.monotonic() + timeout
    while True:
        found = len(re.findall(pattern, worker.log()))
        if found >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def wait_until_finished(database_url: str, timeout: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        statuses = dict(db_rows(database_url, "SELECT filename, status FROM memory_document"))
        if all(s in ("ready", "failed") for s in statuses.values()) or time.monotonic() > deadline:
            return statuses
        time.sleep(0.25)


def healthz(env) -> dict:
    script = ("import django, json; django.setup()\nfrom django.test import Client\n"
              "r = Client().get('/healthz'); print(json.dumps({'code': r.status_code, **r.json()}))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("broker_url", ["redis", "rabbitmq"], indirect=True)
def test_a_worker_process_ingests_and_search_finds_it(tmp_path, database_url, broker_url):
    var = tmp_path / "var"
    env = app_env(var, DATABASE_URL=database_url, CELERY_BROKER_URL=broker_url)
    with workers() as started:
        try:
            manage(env, "migrate", "--no-input", "-v", "0")
            manage(env, "bootstrap", "--tenant", "acme", "--kb", "docs")
            worker = Worker(env, tmp_path / "worker.log", name="scale1")
            started.append(worker.start())
            worker.wait_ready()

            # One document with --wait, as a user would: the idle worker takes it at once.
            out = manage(env, "ingest", str(FIRST), "--tenant", "acme", "--kb", "docs", "--wait", "--timeout", "150")
            record = json.loads(out.stdout.strip().splitlines()[-1])
            assert record["status"] == "ready", record
            assert wait_for_log(worker, rf"{TASK} succeeded", STAGES) == STAGES, worker.log()[-3000:]
            assert len(re.findall(rf"{TASK} received", worker.log())) == STAGES  # not one stage ran inline

            # A batch queued without --wait: nothing but the worker can process it. Timed on one broker
            # only, to keep the suite short; the other broker's run proves the same path.
            batch = BATCH if broker_url.startswith("redis") else []
            started_at = time.monotonic()
            if batch:
                manage(env, "ingest", *map(str, batch), "--tenant", "acme", "--kb", "docs")
            statuses = wait_until_finished(database_url, timeout=240)
            elapsed = time.monotonic() - started_at
            assert set(statuses.values()) == {"ready"} and len(statuses) == 1 + len(batch), statuses
            total = STAGES * (1 + len(batch))
            assert wait_for_log(worker, rf"{TASK} succeeded", total) == total
            if batch:
                print(f"\n{len(batch)} documents through 1 worker process in {elapsed:.1f} s ({len(batch) / elapsed * 60:.1f}"
                      " documents/minute, queued to ready, including the `ingest` process start-up)")

            # The rows are in PostgreSQL: chunks, episodes and facts, no fixed key twice.
            (doc_id, chunk_count, episodes, facts), = db_rows(
                database_url,
                "SELECT id, chunk_count, episode_count, fact_count FROM memory_document WHERE filename = %s",
                (FIRST.name,),
            )
            levels = dict(db_rows(database_url, "SELECT level, count(*) FROM memory_chunk WHERE document_id = %s "
                                                "GROUP BY level", (doc_id,)))
            assert levels["child"] == chunk_count == record["chunks"] >= 1 and levels["parent"] >= 1
            kinds = dict(db_rows(database_url, "SELECT kind, count(*) FROM memory_memory WHERE document_id = %s "
                                               "GROUP BY kind", (doc_id,)))
            assert (kinds["episode"], kinds["atomic_fact"]) == (episodes, facts) == (record["episodes"], record["facts"])
            assert db_rows(database_url, "SELECT document_id, level, ordinal FROM memory_chunk "
                                         "GROUP BY 1, 2, 3 HAVING count(*) > 1") == []

            # Search, in yet another process, finds the fact with its source.
            out = manage(env, "search", "Are hamburgers delicious?", "--tenant", "acme", "--json")
            response = json.loads(out.stdout)
            fact = next((f for f in response["facts"] if f["atomic_fact"] == "Hamburgers are delicious"), None)
            assert fact is not None, [f["atomic_fact"] for f in response["facts"]]
            assert fact["sources"][0]["document_name"] == FIRST.name

            # And the health check sees every dependency up.
            health = healthz(env)
            assert (health["code"], health["status"]) == (200, "ok"), health
        finally:
            for worker in started:
                worker.stop(timeout=15)
            stop_milvus_lite(var)
