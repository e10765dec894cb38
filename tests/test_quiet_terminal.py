"""What the terminal shows while Loci serves (issue 29): no warning lines that look like errors."""

import warnings

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from tests.conftest import DOCS
from tests.test_document_cancel import upload


def test_an_original_is_streamed_under_asgi_without_a_warning(world):
    document = upload(world, DOCS / "LICENSE.md")
    client = AsyncClient()
    client.force_login(world.alice)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        response = async_to_sync(client.get)(f"/api/v1/documents/{document.pk}/original")
        assert response.status_code == 200, response.content
        body = b"".join(async_to_sync(_collect)(response))
    assert body == (DOCS / "LICENSE.md").read_bytes()
    assert not [w for w in caught if "synchronous iterators" in str(w.message)], [str(w.message) for w in caught]


async def _collect(response):
    return [part async for part in response]  # as Django's ASGI handler hands it to the server


IDLE_CLIENT = """
import sys, time
from retrieval.backends.milvus import MilvusVectorIndex
from retrieval.milvus_lite import ensure_server, release
# "path": the index starts its own server; "uri": a server already running, named by its address
# (as the suite's session server and a local standalone are).
index = MilvusVectorIndex({"lite_path": sys.argv[1]} if sys.argv[3] == "path" else {"uri": ensure_server(sys.argv[1])})
index.ping()
time.sleep(float(sys.argv[2]))
index.ping()
index.close()
release(sys.argv[1])
print("idle client ok")
"""


@pytest.mark.slow
@pytest.mark.parametrize("named_by", ["path", "uri"])
def test_an_idle_milvus_lite_client_is_not_sent_away_for_too_many_pings(tmp_path, named_by):
    # pymilvus pinged every 10 s and the embedded server answered GOAWAY too_many_pings after about
    # 150 s without calls (seen at 146 s on 2026-12-01), printed as a gRPC error by every process.
    # Waiting out those 150 s held a test worker for 200 s; gRPC's keepalive trace shows the cause
    # itself: an idle client that sends keepalive pings at all (the old options did, at 10 s and 20 s).
    # A client given the server's loopback URI had gRPC's defaults still (the suite's Milvus Lite
    # tests: "Too many pings" in test_milvus_lite_index.py, 2026-12-06). 22 s idle: past the old second ping.
    import subprocess

    from tests.worker_process import PYTHON, REPO, app_env

    env = app_env(tmp_path / "var", GRPC_TRACE="http_keepalive", GRPC_VERBOSITY="DEBUG")
    done = subprocess.run([PYTHON, "-c", IDLE_CLIENT, str(tmp_path / "milvus.db"), "22", named_by], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=200)
    assert done.returncode == 0 and "idle client ok" in done.stdout, done.stderr[-2000:]
    pings = [line for line in done.stderr.splitlines()
             if "keepalive ping" in line.lower() and "cancelled" not in line.lower()]
    assert not pings, pings[:5]
    assert "too_many_pings" not in done.stderr and "GOAWAY" not in done.stderr, done.stderr[-2000:]
