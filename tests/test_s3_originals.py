"""Originals on S3-compatible storage: a real moto S3 server process, reached over HTTP by django-storages.

Upload stores the object, the parse stage reads it (a temporary local copy), the API streams it back,
and a delete removes it; a missing object fails the document with a reason, a storage that does not
answer is a transient error: retried with backoff for LOCI_ENGINE_RETRY_SECONDS, then the document fails
naming the storage, still retryable.
"""

import json
import subprocess
import sys
import time
import urllib.request

import pytest

from memory.models import Document
from ingest.tasks import run_stage
from tests.conftest import DOCS, api_client
from tests.worker_process import REPO, _kill_group, app_env, free_port

BUCKET = "loci-originals"
PREFIX = "tenant-files"
CREDENTIALS = {"LOCI_S3_ACCESS_KEY_ID": "testing", "LOCI_S3_SECRET_ACCESS_KEY": "testing",
               "LOCI_S3_REGION": "us-east-1"}


@pytest.fixture
def s3_server(tmp_path):
    """`python -m moto.server` on a free port, in its own process group; yields its endpoint URL."""
    port = free_port()
    log = open(tmp_path / "moto.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint + "/", timeout=2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "moto.log").read_text()
                time.sleep(0.1)
        yield {"endpoint": endpoint, "proc": proc}
    finally:
        _kill_group(proc, 9)
        proc.wait(timeout=10)
        log.close()


def _settings_storage(tmp_path, **env) -> dict:
    """STORAGES["default"] as loci/settings.py builds it from this environment (in a fresh process)."""
    code = ("import django, json; django.setup(); from django.conf import settings; "
            "print(json.dumps(settings.STORAGES['default']))")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=app_env(tmp_path / "var", **env),
                         capture_output=True, text=True, timeout=120)
    conf = json.loads(run.stdout) if run.returncode == 0 else {}
    return {"returncode": run.returncode, "stderr": run.stderr, **conf}


@pytest.fixture
def s3_storage(s3_server, settings, tmp_path):
    import boto3

    conf = _settings_storage(tmp_path, LOCI_STORAGE="s3", LOCI_S3_BUCKET=BUCKET, LOCI_S3_PREFIX=PREFIX,
                             LOCI_S3_ENDPOINT_URL=s3_server["endpoint"], **CREDENTIALS)
    assert conf.pop("returncode") == 0, conf["stderr"]
    conf.pop("stderr")
    assert conf["BACKEND"] == "storages.backends.s3.S3Storage"
    client = boto3.client("s3", endpoint_url=s3_server["endpoint"], aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    settings.STORAGES = {**settings.STORAGES, "default": conf}  # Django resets default_storage on this
    return client


def _keys(client) -> list[str]:
    return [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET).get("Contents", [])]


def _upload(world, path):
    response = api_client(world.alice_key).post("/api/v1/documents", {"kb": "docs", "files": [open(path, "rb")]},
                                                format="multipart")
    assert response.status_code == 201, response.content[:300]
    return Document.objects.get(pk=response.json()[0]["document"]["id"])


@pytest.mark.usefixtures("lite_vector_settings")
def test_an_original_goes_to_s3_is_parsed_from_it_downloaded_and_deleted(
        world, s3_storage, s3_server, settings, django_capture_on_commit_callbacks):
    path = DOCS / "pdf" / "fake-memo.pdf"
    document = _upload(world, path)
    key = f"{PREFIX}/{document.original.name}"
    assert _keys(s3_storage) == [key]
    assert s3_storage.get_object(Bucket=BUCKET, Key=key)["Body"].read() == path.read_bytes()
    assert not (settings.MEDIA_ROOT.exists() and any(p.is_file() for p in settings.MEDIA_ROOT.rglob("*")))

    assert run_stage(document.pk, "parse")  # PyMuPDF reads a local copy of the object
    document.refresh_from_db()
    assert document.status == "parsing" and document.detected_type == "pdf" and document.chunk_count > 0
    assert "20,000 bottles of water" in " ".join(document.chunks.values_list("text", flat=True))

    client = api_client(world.alice_key)
    response = client.get(f"/api/v1/documents/{document.pk}/original")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == path.read_bytes()
    assert api_client(world.charlie_key).get(f"/api/v1/documents/{document.pk}/original").status_code == 404

    with django_capture_on_commit_callbacks(execute=True):
        assert client.delete(f"/api/v1/documents/{document.pk}").status_code == 204
    assert _keys(s3_storage) == []


def test_a_missing_object_fails_the_document_and_its_download_is_404(world, s3_storage):
    document = _upload(world, DOCS / "pdf" / "fake-memo.pdf")
    s3_storage.delete_object(Bucket=BUCKET, Key=f"{PREFIX}/{document.original.name}")
    assert not run_stage(document.pk, "parse")
    document.refresh_from_db()
    assert document.status == "failed" and document.error == "The original file is missing from storage."
    response = api_client(world.alice_key).get(f"/api/v1/documents/{document.pk}/original")
    assert response.status_code == 404, response.content[:300]
    assert response.json()["error"] == "The original file is missing from storage."


def test_storage_that_does_not_answer_is_retried_then_fails_naming_it(world, s3_storage, s3_server, settings):
    settings.LOCI_ENGINE_RETRY_SECONDS = 4  # retried with backoff for a bounded time (300 s by default)
    document = _upload(world, DOCS / "pdf" / "fake-memo.pdf")
    _kill_group(s3_server["proc"], 9)
    s3_server["proc"].wait(timeout=10)
    started = time.monotonic()
    assert not run_stage(document.pk, "parse")
    assert time.monotonic() - started >= 0.9  # retried after a 1 s backoff, not failed at the first attempt
    document.refresh_from_db()
    assert document.status == "failed" and document.retryable  # a later rerun may succeed
    assert "storage of originals" in document.error and "Could not read the original" in document.error


def test_s3_storage_needs_a_bucket(tmp_path):
    conf = _settings_storage(tmp_path, LOCI_STORAGE="s3")
    assert conf["returncode"] != 0 and "LOCI_STORAGE=s3 needs LOCI_S3_BUCKET" in conf["stderr"]
    assert _settings_storage(tmp_path)["BACKEND"] == "django.core.files.storage.FileSystemStorage"
