"""A document never stalls: real workers killed, frozen and cut off from Milvus mid-stage (issue 13 §3).

- SIGKILL mid-index on the embedded stack (SQLite, and the filesystem broker, which deletes a
  message file when a worker fetches it) and on Redis with PostgreSQL (which re-delivers only after its visibility timeout, an hour by default): no
  broker brings the stage back, the next worker's sweeper does once the lease has run out. A second
  document whose message was lost while it waited in `queued` is sent again as well.
- A parse re-delivered while the first copy still runs (what Redis does after its visibility
  timeout) finds the lease alive, because a heartbeat renews it, and does not run beside it.
- A worker frozen (SIGSTOP) mid-parse loses its claim to the sweeper; when it wakes up it writes
  nothing over the document the other worker finished.
- The embedded Milvus Lite server stopped mid-index and started again: the stage retries and ends
  `ready`.

The other scenarios run on PostgreSQL. Every scenario ends with the document compared, row for row, with a clean run of the same file,
and `reconcile` finding both indexes exactly as the database says.
"""

import json
import threading
import time
from pathlib import Path

import pymupdf
import pytest

from tests.conftest import DOCS
from tests.test_parsing_ocr import png_bytes, text_image
from tests.test_worker_kill import INDEX_BAND_START, document, stored_rows, wait_for
from tests.worker_process import (
    REDIS_HOST, REDIS_PORT, Worker, app_env, db_rows, install, manage, need_service, postgres_database, redis_database,
    stop_milvus_lite, workers,
)

# Each scenario waits for several stages of real workers, with bounds of its own (up to 240 s each).
pytestmark = pytest.mark.timeout(900)

LEASE_SECONDS = 3
# Short, so each scenario's take-over happens within seconds; the defaults are 60 s and 30 s.
TIMINGS = dict(LOCI_STAGE_LEASE_SECONDS=str(LEASE_SECONDS), LOCI_SWEEP_INTERVAL_SECONDS="0.5",
               LOCI_STALLED_QUEUE_SECONDS="6", LOCI_ENGINE_RETRY_SECONDS="120")
DOCUMENT = DOCS / "LICENSE.md"  # two embedding batches: the index stage has a middle to be killed in
LOST = DOCS / "book-war-and-peace-1p.txt"
FINISHED = ("ready", "failed")
REDELIVER_PARSE = """
import time
from memory.models import Document
from ingest.tasks import process_document_stage
while not Document.objects.filter(status="parsing").exists():
    time.sleep(0.05)
time.sleep({lease})
process_document_stage.delay(Document.objects.get(status="parsing").pk, "parse")
"""


@pytest.fixture
def database_url(request, tmp_path):
    """The scenario's database: a fresh PostgreSQL database, or (param "sqlite") the embedded stack's
    SQLite file in the scenario's var dir, where an installation without DATABASE_URL keeps it."""
    if getattr(request, "param", "postgresql") == "sqlite":
        yield f"sqlite:///{tmp_path / 'var' / 'loci.sqlite3'}"
        return
    need_service("PostgreSQL", "127.0.0.1", 5432)
    with postgres_database() as url:
        yield url


@pytest.fixture
def scenario(tmp_path, database_url):
    """make(*kb_slugs, **env) -> (var dir, env) of a migrated installation; its Milvus Lite stopped at the end."""
    made = []

    def make(*kbs, **overrides):
        var = tmp_path / "var"
        database = {} if database_url.startswith("sqlite:") else {"DATABASE_URL": database_url}
        env = app_env(var, **database, **TIMINGS, **overrides)
        made.append(var)
        install(env, *kbs)
        return var, env

    yield make
    for var in made:  # after the test's workers stopped (their `with workers()` has exited)
        stop_milvus_lite(var)


def scanned_pdf(path: Path, pages: int) -> Path:
    """A PDF of page images without a text layer: parse OCRs it page by page (a second or more each)."""
    pdf = pymupdf.open()
    for n in range(pages):
        page = pdf.new_page()
        lines = [f"Warehouse inventory sheet {n + 1}", f"Aisle {n + 3} holds {17 * (n + 1)} crates of pears",
                 "Counted by the night shift", f"Next count due in {n + 2} weeks"]
        page.insert_image(pymupdf.Rect(36, 36, 576, 336), stream=png_bytes(text_image(lines)))
    pdf.save(path)
    return path


def assert_same_as_clean_run(env, database_url, doc, clean_kb, path):
    manage(env, "ingest", str(path), "--tenant", "acme", "--kb", clean_kb)
    clean = wait_for(database_url, clean_kb, lambda d: d["status"] in FINISHED, 240, "the clean run")
    assert clean["status"] == "ready", clean
    for key in ("chunks", "episodes", "facts"):
        assert doc[key] == clean[key], (key, doc, clean)
    assert stored_rows(database_url, doc["id"]) == stored_rows(database_url, clean["id"])
    assert db_rows(database_url, "SELECT document_id, level, ordinal FROM memory_chunk "
                                 "GROUP BY 1, 2, 3 HAVING count(*) > 1") == []
    assert facts_without_sources(database_url, doc["id"]) == 0


def assert_indexes_match_database(env):
    report = json.loads(manage(env, "reconcile", "--tenant", "acme").stdout.strip().splitlines()[-1])
    for index in ("vector", "keyword"):
        assert (report[index]["missing"], report[index]["stale"]) == (0, 0), report
    return report


def facts_without_sources(database_url, document_id) -> int:
    return db_rows(database_url, "SELECT count(*) FROM memory_memory m WHERE m.document_id = %s AND "
                                 "m.kind = 'atomic_fact' AND NOT EXISTS (SELECT 1 FROM memory_memory_source_chunks s "
                                 "WHERE s.memory_id = m.id)", (document_id,))[0][0]


def chunk_ids(database_url, document_id) -> list[int]:
    return [r[0] for r in db_rows(database_url, "SELECT id FROM memory_chunk WHERE document_id = %s ORDER BY id",
                                  (document_id,))]


def lose_waiting_messages(broker: str, var: Path) -> int:
    """Drop every message waiting in the queue, as a worker that fetched them and died would."""
    if broker == "filesystem":
        files = list((var / "broker" / "queue").glob("*.msg"))
        for f in files:
            f.unlink()
        return len(files)
    import redis

    client = redis.Redis.from_url(broker)
    lost = client.llen("celery")
    client.delete("celery")
    return lost


@pytest.mark.slow
# The embedded stack (filesystem broker, SQLite), which every installation starts as, and the
# scaled-out one (Redis, PostgreSQL).
@pytest.mark.parametrize("broker, database_url", [("filesystem", "sqlite"), ("redis", "postgresql")],
                         indirect=["database_url"])
def test_a_killed_workers_documents_are_swept_and_finished_without_duplicates(tmp_path, scenario, database_url, broker):
    if broker == "redis":
        need_service("Redis", REDIS_HOST, REDIS_PORT)
    with (redis_database() if broker == "redis" else _nothing()) as redis_url, workers() as started:
        broker_env = {"CELERY_BROKER_URL": redis_url} if redis_url else {}  # default: filesystem://
        # A cold embedding cache of its own: with vectors other tests left in the run's cache the index
        # stage can finish between two polls, before the kill lands (seen under load).
        var, env = scenario("killed", "lost", "clean", "clean-lost", **broker_env,
                            EMBEDDING_CACHE_PATH=str(tmp_path / "cold-embedding-cache.sqlite3"))
        first = Worker(env, tmp_path / "worker1.log", name="first")
        started.append(first.start())
        first.wait_ready()

        manage(env, "ingest", str(DOCUMENT), "--tenant", "acme", "--kb", "killed")
        at_kill = wait_for(database_url, "killed", lambda d: d["status"] in FINISHED or (
            d["status"] == "indexing" and d["progress"] > INDEX_BAND_START), 240, "indexing with a batch written")
        assert at_kill["status"] == "indexing", f"finished before the kill could land: {at_kill}"
        first.kill()
        # A document queued while no worker runs, whose message then goes missing.
        manage(env, "ingest", str(LOST), "--tenant", "acme", "--kb", "lost")
        assert lose_waiting_messages(redis_url or "filesystem", var) >= 1
        time.sleep(LEASE_SECONDS + 1)
        assert document(database_url, "killed")["status"] == "indexing"  # no broker brought it back
        assert document(database_url, "lost")["status"] == "queued"

        second = Worker(env, tmp_path / "worker2.log", name="second")
        started.append(second.start())
        second.wait_ready()
        killed = wait_for(database_url, "killed", lambda d: d["status"] in FINISHED, 120, "ready after the sweep")
        lost = wait_for(database_url, "lost", lambda d: d["status"] in FINISHED, 120, "the lost message sent again")
        assert (killed["status"], lost["status"]) == ("ready", "ready"), (killed, lost)
        assert "lease expired" in second.log() and "message lost" in second.log()

        assert_same_as_clean_run(env, database_url, killed, "clean", DOCUMENT)
        assert_same_as_clean_run(env, database_url, lost, "clean-lost", LOST)
        report = assert_indexes_match_database(env)
        print(f"\n{broker}: killed at {at_kill['stage']} {at_kill['progress']}%, swept and finished by the second "
              f"worker; lost message sent again; reconcile: {report['expected']} rows, none missing or stale")


@pytest.mark.slow
def test_a_parse_redelivered_while_the_first_copy_runs_does_not_run_beside_it(tmp_path, scenario, database_url):
    var, env = scenario("scans")
    scan = scanned_pdf(tmp_path / "inventory.pdf", pages=10)
    with workers() as started:
        worker = Worker(env, tmp_path / "worker.log", name="pair", concurrency=2)
        started.append(worker.start())
        worker.wait_ready()
        manage(env, "ingest", str(scan), "--tenant", "acme", "--kb", "scans")
        # OCR of ten pages outlasts the lease. Once the lease would have run out without a
        # heartbeat, the parse is delivered again, as Redis does after its visibility timeout.
        # (From a process started now: a Django shell takes seconds to start.)
        redeliver = threading.Thread(target=manage, args=(env, "shell", "-c", REDELIVER_PARSE.format(
            lease=LEASE_SECONDS + 1)))
        redeliver.start()
        redeliver.join(timeout=120)
        parsing = document(database_url, "scans")
        assert parsing["status"] == "parsing", f"the parse ended before the re-delivery: {parsing}"
        done = wait_for(database_url, "scans", lambda d: d["status"] in FINISHED, 240, "ready")
        assert done["status"] == "ready", done
        ready_chunks = chunk_ids(database_url, done["id"])
        time.sleep(LEASE_SECONDS * 2)  # a parallel copy, had it started, would have written by now
        assert document(database_url, "scans")["status"] == "ready"
        assert chunk_ids(database_url, done["id"]) == ready_chunks  # nobody replaced the chunks
        assert facts_without_sources(database_url, done["id"]) == 0
        assert "stage is leased for" in worker.log()  # the copy found the lease alive
        assert worker.log().count("lost its claim") == 0
        assert_indexes_match_database(env)
        print(f"\nparse re-delivered {LEASE_SECONDS + 1}s into its run, with a {LEASE_SECONDS}s lease: refused; "
              f"{len(ready_chunks)} chunks untouched")


@pytest.mark.slow
def test_a_frozen_worker_that_lost_its_claim_writes_nothing_when_it_wakes(tmp_path, scenario, database_url):
    var, env = scenario("scans", "clean")
    scan = scanned_pdf(tmp_path / "inventory.pdf", pages=4)
    with workers() as started:
        first = Worker(env, tmp_path / "worker1.log", name="first")
        started.append(first.start())
        first.wait_ready()
        manage(env, "ingest", str(scan), "--tenant", "acme", "--kb", "scans")
        wait_for(database_url, "scans", lambda d: d["status"] == "parsing" or d["status"] in FINISHED, 120, "parsing")
        first.pause()
        assert document(database_url, "scans")["status"] == "parsing"

        second = Worker(env, tmp_path / "worker2.log", name="second")
        started.append(second.start())
        second.wait_ready()
        done = wait_for(database_url, "scans", lambda d: d["status"] in FINISHED, 240, "ready by the second worker")
        assert done["status"] == "ready", done
        ready_chunks = chunk_ids(database_url, done["id"])

        first.resume()  # wakes mid-OCR; its parse then tries to replace the chunks
        deadline = time.monotonic() + 120
        while "lost its claim" not in first.log() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "lost its claim" in first.log(), first.log()[-3000:]
        time.sleep(1)
        assert document(database_url, "scans")["status"] == "ready"
        assert chunk_ids(database_url, done["id"]) == ready_chunks
        assert_same_as_clean_run(env, database_url, done, "clean", scan)
        assert_indexes_match_database(env)


@pytest.mark.slow
def test_milvus_lite_stopped_mid_index_and_started_again_the_document_ends_ready(tmp_path, scenario, database_url):
    from retrieval.milvus_lite import ensure_server, stop_server

    # A cold embedding cache of its own: with vectors other tests left in the run's cache the index
    # stage can finish between two polls, before the server is stopped (seen under load).
    var, env = scenario("outage", "clean", EMBEDDING_CACHE_PATH=str(tmp_path / "cold-embedding-cache.sqlite3"),
                        LOCI_VECTOR_BACKEND="retrieval.backends.milvus.MilvusVectorIndex")  # its server is stopped
    with workers() as started:
        worker = Worker(env, tmp_path / "worker.log", name="w")
        started.append(worker.start())
        worker.wait_ready()
        manage(env, "ingest", str(DOCUMENT), "--tenant", "acme", "--kb", "outage")
        at_stop = wait_for(database_url, "outage", lambda d: d["status"] in FINISHED or (
            d["status"] == "indexing" and d["progress"] > INDEX_BAND_START), 240, "indexing with a batch written")
        assert at_stop["status"] == "indexing", f"finished before the server could be stopped: {at_stop}"
        assert stop_server(var / "milvus.db")
        time.sleep(4)
        assert document(database_url, "outage")["status"] == "indexing"  # retrying, not failed
        ensure_server(var / "milvus.db", int(env["MILVUS_LITE_PORT"]))
        done = wait_for(database_url, "outage", lambda d: d["status"] in FINISHED, 180, "ready after the restart")
        assert done["status"] == "ready", done
        assert "did not answer at the index stage" in worker.log()
        assert_same_as_clean_run(env, database_url, done, "clean", DOCUMENT)
        assert_indexes_match_database(env)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
