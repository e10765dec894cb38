"""GET /metrics in the Prometheus text format: scraped from a real uvicorn process, summed across processes."""

import json
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.worker_process import PYTHON, REPO, _kill_group, app_env, free_port, manage, stop_milvus_lite

TOKEN = "metrics-token-for-the-test"
TEXT = (
    "The lighthouse keeper logs the weather every morning at six.\n\n"
    "Storms in November close the harbour for three days on average.\n\n"
    "The keeper's cat is called Biscuit and sleeps in the lamp room.\n"
)


def _get(port: int, path: str, headers: dict | None = None, body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers={
        **({"Content-Type": "application/json"} if data else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode()


def _samples(text: str) -> dict:
    """{(sample name, frozenset(labels)): value} of every sample in a scrape."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples: dict, name: str, **labels) -> float:
    return samples[(name, frozenset(labels.items()))]


@pytest.fixture
def server(tmp_path):
    var = tmp_path / "var"
    # No warm start: its probe query would count as one more query embedding than the searches make
    # (warm start has tests of its own, tests/test_warmup.py).
    env = app_env(var, LOCI_METRICS_TOKEN=TOKEN, LOCI_WARM_START="0")
    manage(env, "migrate", "--no-input")
    out = manage(env, "bootstrap", "--tenant", "acme", "--kb", "docs", "--api-key").stdout
    key = out.split("API key (shown once): ", 1)[1].split()[0]
    port = free_port()
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen([PYTHON, "-m", "uvicorn", "loci.asgi:application", "--host", "127.0.0.1",
                             "--port", str(port), "--no-access-log"], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(port, "/healthz")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.2)
        yield {"port": port, "env": env, "key": key, "tmp": tmp_path}
    finally:
        _kill_group(proc, 15)
        proc.wait(timeout=30)
        log.close()
        stop_milvus_lite(var)


@pytest.mark.slow
def test_a_scrape_after_an_ingest_and_searches_has_every_family(server):
    port, tmp = server["port"], server["tmp"]
    (tmp / "lighthouse.txt").write_text(TEXT)
    (tmp / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj garbage\n")
    # No worker runs: `ingest --wait` processes both files itself, in its own process, and exits. Its
    # stage metrics reaching the server's scrape is the multiprocess mode at work.
    out = manage(server["env"], "ingest", str(tmp / "lighthouse.txt"), str(tmp / "broken.pdf"),
                 "--tenant", "acme", "--kb", "docs", "--wait", expect_exit=1).stdout  # 1: a document failed
    results = {r["name"]: r for r in map(json.loads, out.splitlines())}
    assert results["lighthouse.txt"]["status"] == "ready" and results["broken.pdf"]["status"] == "failed"
    ready = results["lighthouse.txt"]
    bearer = {"Authorization": f"Bearer {server['key']}"}
    for method in ("keyword", "hybrid"):
        status, _, body = _get(port, "/api/v1/memories/search", bearer, {"query": "harbour storms", "method": method})
        assert status == 200, body
    status, _, body = _get(port, "/api/v1/memories/search", bearer, {"query": "x", "filters": {"kb": ["nope"]}})
    assert status == 400, body

    status, headers, body = _get(port, "/metrics")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer") and "LOCI_METRICS_TOKEN" in body
    assert _get(port, "/metrics", bearer)[0] == 401  # an API key is not the metrics token
    status, headers, body = _get(port, "/metrics", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=")
    samples = _samples(body)

    stage = "loci_ingest_stage_duration_seconds"
    for name in ("parse", "extract", "index"):
        assert _value(samples, f"{stage}_count", stage=name, outcome="ok") == 1
        assert _value(samples, f"{stage}_bucket", stage=name, outcome="ok", le="+Inf") == 1
        assert _value(samples, f"{stage}_sum", stage=name, outcome="ok") > 0
    assert _value(samples, f"{stage}_count", stage="parse", outcome="failed") == 1
    assert _value(samples, "loci_ingest_stage_failures_total", stage="parse", kind="failed") == 1
    assert ("loci_ingest_stage_failures_total", frozenset({"stage": "extract", "kind": "failed"})) not in samples

    search = "loci_search_duration_seconds"
    assert _value(samples, f"{search}_count", method="keyword", outcome="ok") == 1
    assert _value(samples, f"{search}_count", method="hybrid", outcome="ok") == 1
    assert _value(samples, f"{search}_count", method="hybrid", outcome="error") == 1  # the unknown KB
    assert 0 < _value(samples, f"{search}_sum", method="keyword", outcome="ok") < 30

    embedded = {kind: _value(samples, "loci_embedding_texts_total", embedder=e, kind=kind)
                for (name, labels) in samples if name == "loci_embedding_texts_total"
                for e, kind in [(dict(labels)["embedder"], dict(labels)["kind"])]}
    rows = ready["chunks"] + ready["episodes"] + ready["facts"]
    assert embedded["document"] >= rows  # every row's text, embedded once in the ingest process
    assert embedded["query"] == 1  # hybrid's query embedding in the server; keyword embeds nothing
    assert sum(v for (n, _), v in samples.items() if n == "loci_embedding_seconds_total") > 0

    assert _value(samples, "loci_documents", status="ready") == 1
    assert _value(samples, "loci_documents", status="failed") == 1
    assert _value(samples, "loci_documents", status="queued") == 0
    assert all(_value(samples, "loci_documents_stalled", status=s) == 0 for s in ("parsing", "extracting", "indexing"))
    assert _value(samples, "loci_documents_queued_oldest_seconds") == 0
    assert _value(samples, "loci_index_rows", index="vector", tenant="acme") == rows
    assert _value(samples, "loci_index_rows", index="keyword", tenant="acme") == rows
    assert _value(samples, "loci_index_count_errors", index="vector") == 0


def test_staff_sessions_may_scrape_and_other_users_may_not(world, settings, client, lite_vector_settings):
    settings.LOCI_METRICS_TOKEN = ""
    client.force_login(world.alice)
    response = client.get("/metrics")
    assert response.status_code == 403 and response.json()["error"] == "Metrics are for staff users."
    world.bob.is_staff = True
    world.bob.save(update_fields=["is_staff"])
    client.force_login(world.bob)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert _value(_samples(response.content.decode()), "loci_documents", status="ready") == 0
    # No token configured: no bearer value opens it.
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401
    assert client.post("/metrics").status_code == 405


def test_stalled_documents_are_counted_past_their_lease(world, settings, client, lite_vector_settings):
    from django.utils import timezone

    from memory.models import Document

    settings.LOCI_METRICS_TOKEN = TOKEN
    settings.LOCI_STAGE_LEASE_SECONDS = 60
    long_ago = timezone.now() - timezone.timedelta(seconds=120)
    for i, status in enumerate(["parsing", "parsing", "indexing"]):
        Document.objects.create(kb=world.docs, filename=f"f{i}.txt", sha256=f"{i:064}", size=1, status=status)
    Document.objects.filter(filename__in=["f0.txt", "f2.txt"]).update(updated_at=long_ago)  # f1 still moves
    samples = _samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    assert _value(samples, "loci_documents_stalled", status="parsing") == 1
    assert _value(samples, "loci_documents_stalled", status="indexing") == 1
    assert _value(samples, "loci_documents", status="parsing") == 2
