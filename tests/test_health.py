"""The operator's view of a process: GET /healthz, and one JSON object per log line with LOG_FORMAT=json.

Every failure here is real: a closed port, a port that accepts and never answers, a database
that is not there. Nothing is mocked.
"""

import io
import json
import logging
import socket
import subprocess
import sys
import time

import pytest

from loci.health import CHECK_TIMEOUT_SECONDS
from tests.worker_process import REPO, app_env, free_port

CHECK_NAMES = {"database", "broker", "vector_index", "keyword_index"}


@pytest.fixture
def embedded_indexes(settings, tmp_path):
    """The default backends (vectors in SQLite, SQLite FTS5) over this test's own files: no server."""
    from retrieval.backends import reset_backends

    broker = tmp_path / "broker"
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(broker / "queue"), "data_folder_out": str(broker / "queue"),
        "processed_folder": str(broker / "processed"), "store_processed": False,
    }
    # Each client built and connected once, as a started process has: a fresh process's first check
    # also pays for imports and connections, which a loaded CI machine can stretch past the timeout.
    # That cold start is the compose health check's start_period's job.
    from retrieval.backends import keyword_index, vector_index
    from retrieval.backends.base import IndexFilter

    assert type(vector_index()).__name__ == "SqliteVectorIndex"
    vector_index().count(IndexFilter(tenant_id=0, kb_ids=(0,)))
    keyword_index().count(IndexFilter(tenant_id=0, kb_ids=(0,)))
    yield
    reset_backends()


def get_health(client):
    started = time.monotonic()
    response = client.get("/healthz")
    return response, response.json(), time.monotonic() - started


def test_it_is_ok_on_the_embedded_default(client, db, embedded_indexes):
    response, body, elapsed = get_health(client)  # an anonymous client: no auth needed
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert set(body["checks"]) == CHECK_NAMES
    assert all(check["status"] == "ok" for check in body["checks"].values()), body
    assert "failing" not in body
    assert "no-cache" in response["Cache-Control"]
    assert elapsed < CHECK_TIMEOUT_SECONDS


@pytest.mark.parametrize("scheme", ["redis://127.0.0.1:{port}/0", "amqp://guest:s3cret-pw@127.0.0.1:{port}//"])
def test_it_names_the_broker_when_nothing_listens_on_its_port(client, db, embedded_indexes, settings, scheme):
    port = free_port()  # bound, then released: nothing listens there now
    settings.CELERY_BROKER_URL = scheme.format(port=port)
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
    response, body, elapsed = get_health(client)
    assert response.status_code == 503
    assert body["status"] == "fail"
    assert body["failing"] == ["broker"]
    assert body["checks"]["broker"]["status"] == "fail"
    assert body["checks"]["broker"]["error"]
    assert all(body["checks"][name]["status"] == "ok" for name in CHECK_NAMES - {"broker"}), body
    # The body is public: no URL, port or password from the broker's error.
    assert str(port) not in response.content.decode() and "s3cret" not in response.content.decode()
    assert elapsed < CHECK_TIMEOUT_SECONDS + 1


@pytest.fixture
def silent_port():
    """A port that accepts connections and never says a word (a hung server, a black-holing proxy)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


def test_a_dependency_that_never_answers_fails_within_the_timeout(client, db, embedded_indexes, settings, silent_port):
    settings.CELERY_BROKER_URL = f"amqp://guest:guest@127.0.0.1:{silent_port}//"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}
    response, body, elapsed = get_health(client)
    assert response.status_code == 503
    assert body["failing"] == ["broker"]
    assert elapsed < CHECK_TIMEOUT_SECONDS + 1.5


def test_it_names_the_indexes_when_their_servers_are_down(client, db, embedded_indexes, settings):
    settings.LOCI_VECTOR_INDEX = {
        "BACKEND": "retrieval.backends.milvus.MilvusVectorIndex",
        "OPTIONS": {**settings.LOCI_VECTOR_INDEX["OPTIONS"], "uri": f"http://127.0.0.1:{free_port()}"},
    }
    settings.LOCI_KEYWORD_INDEX = {
        "BACKEND": "retrieval.backends.opensearch.OpenSearchKeywordIndex",
        "OPTIONS": {"url": f"http://127.0.0.1:{free_port()}", "index_prefix": "loci", "verify_certs": True},
    }
    response, body, elapsed = get_health(client)
    assert response.status_code == 503
    assert sorted(body["failing"]) == ["keyword_index", "vector_index"], body
    assert body["checks"]["database"]["status"] == body["checks"]["broker"]["status"] == "ok"
    assert elapsed < CHECK_TIMEOUT_SECONDS + 1.5


def test_it_names_the_database_when_it_is_unreachable(tmp_path):
    """A whole process pointed at a PostgreSQL port where nothing listens (Django's test DB cannot be unplugged)."""
    closed = free_port()
    env = app_env(tmp_path, DATABASE_URL=f"postgres://loci:pw@127.0.0.1:{closed}/loci", CELERY_BROKER_URL="memory://",
                  MILVUS_URI=f"http://127.0.0.1:{free_port()}")
    script = (
        "import django, json; django.setup()\n"
        "from django.test import Client\n"
        "r = Client().get('/healthz')\n"
        "print(json.dumps({'code': r.status_code, 'body': r.json()}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 503
    assert "database" in result["body"]["failing"]
    assert result["body"]["checks"]["broker"]["status"] == "ok"


# --- Structured logs


def test_a_log_record_is_one_json_line():
    from common.logging import JsonFormatter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("loci.test.json")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("document %s failed:\nline two", 7, extra={"document_id": 7, "stage": "parse"})
        try:
            raise ValueError("bad\npage")
        except ValueError:
            logger.exception("with a traceback")
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2  # newlines in messages and tracebacks are escaped, not written
    first, second = map(json.loads, lines)
    assert first["message"] == "document 7 failed:\nline two"
    assert (first["level"], first["logger"], first["document_id"], first["stage"]) == ("WARNING", "loci.test.json", 7, "parse")
    assert first["time"]
    assert "ValueError: bad\npage" in second["exc"]


def test_log_format_json_makes_a_process_log_json(tmp_path):
    env = app_env(tmp_path, LOG_FORMAT="json")
    script = (
        "import django, logging; django.setup()\n"
        "logging.getLogger('ingest.tasks').warning('document %s is slow', 3, extra={'document_id': 3})\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.strip()]
    assert {"message": "document 3 is slow", "document_id": 3, "logger": "ingest.tasks", "level": "WARNING"}.items() <= records[-1].items()


@pytest.mark.parametrize("level, ok", [("Bounded", True), ("sometimes", False)])
def test_the_milvus_consistency_level_is_a_setting_checked_at_start(tmp_path, level, ok):
    env = app_env(tmp_path, MILVUS_CONSISTENCY_LEVEL=level, LOCI_VECTOR_BACKEND="retrieval.backends.milvus.MilvusVectorIndex")
    script = ("import django; django.setup()\nfrom retrieval.backends import vector_index\n"
              "print(vector_index().consistency)\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == level
    else:
        assert proc.returncode != 0 and "MILVUS_CONSISTENCY_LEVEL" in proc.stderr
