"""Documents finish in the order they came, and the API says `queued` while one waits (issue 29).

The order test runs a real Celery worker (one process) over a queue that four uploads filled before
it started: breadth-first, every file was parsed before the first was extracted, so the first
file's wait grew with every file behind it.
"""

import json

import pytest

from tests.conftest import api_client
from tests.worker_process import Worker, app_env, install, manage, stop_milvus_lite

TEXTS = [f"Note {n}. The depot ordered {n + 2} new pallets of paper for the spring audit.\n" for n in range(4)]


@pytest.mark.slow
def test_each_document_is_finished_before_the_next_one_starts(tmp_path):
    var = tmp_path / "var"
    env = app_env(var)
    paths = []
    for n, text in enumerate(TEXTS):
        paths.append(tmp_path / f"note-{n}.txt")
        paths[-1].write_text(text)
    worker = None
    try:
        install(env, "docs")
        manage(env, "ingest", *map(str, paths), "--tenant", "acme", "--kb", "docs")  # queued: no worker yet
        worker = Worker(env, tmp_path / "worker.log").start()
        worker.wait_ready()
        done = manage(env, "ingest", *map(str, paths), "--tenant", "acme", "--kb", "docs", "--wait",
                      "--timeout", "240", timeout=300)
        assert all(json.loads(line)["status"] == "ready" for line in done.stdout.splitlines() if line.startswith("{"))
        rows = json.loads(manage(env, "shell", "-c", (
            "import json; from memory.models import Document as D; print(json.dumps([[d.filename, "
            "d.started_at.isoformat(), d.finished_at.isoformat()] for d in D.objects.order_by('id')]))")
        ).stdout.strip().splitlines()[-1])
    finally:
        if worker is not None:
            worker.stop(timeout=15)
        stop_milvus_lite(var)
    assert [name for name, _, _ in rows] == [p.name for p in paths]
    for (name, _, finished), (following, started, _) in zip(rows, rows[1:]):
        assert finished <= started, f"{following} started at {started} before {name} was ready at {finished}"


@pytest.mark.parametrize("status, claimed, shown, waiting_for", [
    ("queued", False, "queued", "parsing"),
    ("parsing", False, "queued", "extracting"),
    ("extracting", False, "queued", "indexing"),
    ("parsing", True, "parsing", None),
    ("indexing", True, "indexing", None),
    ("ready", False, "ready", None),
])
def test_the_api_says_queued_while_a_document_waits_between_stages(world, status, claimed, shown, waiting_for,
                                                                    api_schema_check):
    import uuid

    from memory.models import Document

    document = Document.objects.create(kb=world.docs, filename="a.txt", sha256="0" * 64, status=status,
                                       claim_token=uuid.uuid4() if claimed else None)
    answer = api_client(world.acme_ro_key).get(f"/api/v1/documents/{document.pk}").json()
    assert (answer["status"], answer["waiting_for"]) == (shown, waiting_for)
