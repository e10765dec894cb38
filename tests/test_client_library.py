"""The Python client library against a real `manage.py up` (uvicorn, a Celery worker, Milvus Lite): one per module.

Alice's key reads and writes all of acme, the docs key only its "docs" KB, the reader key only reads.
Failed keys are counted per address: the server trusts one X-Forwarded-For hop, so the lock-out test
locks out an address of its own and nobody else.
"""

import asyncio
import os
import signal
import subprocess
import time
import uuid

import httpx
import pytest

from loci_client import (
    AsyncLoci,
    BadRequest,
    Loci,
    LociError,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    Unauthorized,
)
from tests.worker_process import PYTHON, REPO, app_env, free_port, manage, stop_milvus_lite

pytestmark = pytest.mark.slow

SETUP = """
import json
from tenants.models import ApiKey, KnowledgeBase, Tenant

acme = Tenant.objects.create(slug="acme", name="Acme")
docs = KnowledgeBase.objects.create(tenant=acme, slug="docs", name="Docs")
KnowledgeBase.objects.create(tenant=acme, slug="conversations", name="Conversations")
keys = {"alice": ApiKey.issue(acme, "alice", can_write=True)[1], "reader": ApiKey.issue(acme, "reader")[1],
        "docs_only": ApiKey.issue(acme, "docs-only", can_write=True, knowledge_bases=[docs])[1]}
print(json.dumps(keys))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import json

    var = tmp_path_factory.mktemp("client")
    port = free_port()
    env = app_env(var, LOCI_MAX_UPLOAD_MB="1", LOCI_TRUSTED_PROXIES="1", LOCI_API_KEY_FAILURES_PER_IP="2")
    manage(env, "migrate", "--no-input", "-v", "0")
    keys = json.loads(manage(env, "shell", "-c", SETUP).stdout.strip().splitlines()[-1])
    base = f"http://127.0.0.1:{port}"
    with open(var / "up.log", "wb") as log:
        up = subprocess.Popen([PYTHON, "manage.py", "up", "--port", str(port), "--concurrency", "1"], cwd=REPO,
                              env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=5)
                break  # any answer: it serves (a 503 names an engine still starting)
            except httpx.TransportError:
                if up.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"up did not serve:\n{(var / 'up.log').read_text()[-3000:]}") from None
                time.sleep(0.5)
        yield base, keys
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)  # up stops its children and Milvus Lite
            try:
                up.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
        stop_milvus_lite(var)


def turns(*lines: str) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text, "timestamp": f"2024-05-01T09:0{i}:00Z"}
            for i, text in enumerate(lines)]


def test_memories_are_added_flushed_found_with_sources_and_deleted(server):
    base, keys = server
    with Loci(base, keys["alice"]) as loci:
        added = loci.memories.add("u1", "dogs", turns("I adopted a greyhound named Biscuit last spring.",
                                                      "Lovely, how is Biscuit settling in?"), kb="conversations")
        assert added["status"] == "accumulated" and added["kb"] == "conversations"
        assert loci.memories.flush("u1", "dogs", kb="conversations")["status"] == "extracted"

        found = loci.search("greyhound Biscuit", method="hybrid", top_k=5, filters={"user_id": "u1"})
        fact = found["facts"][0]
        assert "greyhound" in fact["atomic_fact"]
        assert fact["sources"][0]["type"] == "message" and fact["sources"][0]["session_id"] == "dogs"
        assert found["query"]["filters_applied"]["user_id"] == "u1"

        memory = loci.memories.get(fact["id"])
        assert memory["memory_type"] == "atomic_fact" and memory["session_id"] == "dogs"
        page = loci.memories.list(user_id="u1", memory_type="episode")
        assert page["count"] == 1
        assert loci.memories.delete(page["results"][0]["id"])["deleted"] >= 2  # the episode with its facts
        with pytest.raises(NotFound):
            loci.memories.get(fact["id"])


def test_a_document_is_uploaded_processed_by_the_worker_and_found_by_its_chunks(server, tmp_path):
    base, keys = server
    path = tmp_path / "garden.md"
    path.write_text("# Garden plan\n\nTomatoes grow along the south wall; the basil sits between them.\n")
    with Loci(base, keys["alice"], kb="docs") as loci:
        upload = loci.documents.upload(path)
        assert upload["duplicate"] is False and upload["document"]["kb"] == "docs"
        document = loci.documents.wait(upload["document"]["id"], timeout=300, interval=0.5)
        assert document["status"] == "ready", document["error"]
        assert document["chunk_count"] >= 1
        assert loci.documents.upload(path)["duplicate"] is True

        found = loci.search("tomatoes south wall", method="keyword", memory_types=["chunk"])
        assert "Tomatoes" in found["chunks"][0]["text"]
        assert found["chunks"][0]["sources"][0]["document_name"] == "garden.md"


def test_the_async_client_does_the_same(server):
    base, keys = server

    async def scenario():
        async with AsyncLoci(base, keys["alice"]) as loci:
            await loci.memories.add("u2", "bikes", turns("My touring bicycle is a green Surly.", "Where do you ride?"))
            assert (await loci.memories.flush("u2", "bikes"))["status"] == "extracted"
            found = await loci.search("green Surly bicycle", filters={"user_id": "u2"})
            assert "Surly" in found["facts"][0]["atomic_fact"]
            assert [kb["slug"] for kb in await loci.knowledge_bases.list()] == ["conversations", "docs"]
            with pytest.raises(NotFound):
                await loci.memories.get(str(uuid.uuid4()))

    asyncio.run(scenario())


def test_a_key_limited_to_one_kb_lists_and_searches_only_it(server):
    base, keys = server
    with Loci(base, keys["docs_only"]) as loci:
        assert [kb["slug"] for kb in loci.knowledge_bases.list()] == ["docs"]
        with pytest.raises(BadRequest) as refused:
            loci.search("greyhound", filters={"kb": ["conversations"]})
        assert "Unknown knowledge base" in refused.value.message


def test_the_apis_errors_are_raised_as_typed_exceptions(server, tmp_path):
    base, keys = server
    with Loci(base, keys["alice"]) as loci:
        with pytest.raises(BadRequest) as bad:
            loci.search("x", top_k=1000)
        assert bad.value.status == 400 and "'top_k' must be an integer" in bad.value.message
        big = tmp_path / "big.txt"
        big.write_bytes(b"word " * 300_000)  # 1.5 MB, over LOCI_MAX_UPLOAD_MB=1
        with pytest.raises(PayloadTooLarge) as too_large:
            loci.documents.upload(big, kb="docs")
        assert "LOCI_MAX_UPLOAD_MB" in too_large.value.message
    with Loci(base, keys["reader"]) as reader, pytest.raises(PermissionDenied) as denied:
        reader.memories.add("u3", "s", turns("hello there"))
    assert denied.value.status == 403 and "read-only" in denied.value.message
    with Loci(base, "loci_000000000000_nope", headers={"X-Forwarded-For": "10.0.0.1"}) as stranger:
        with pytest.raises(Unauthorized) as unauthorized:
            stranger.search("anything")
    assert unauthorized.value.message == "Invalid or revoked API key."
    assert isinstance(unauthorized.value, LociError)


def test_a_locked_out_address_gets_rate_limited_with_retry_after(server):
    base, keys = server
    with Loci(base, "loci_000000000000_nope", headers={"X-Forwarded-For": "10.0.0.2"}) as guesser:
        for _ in range(2):  # LOCI_API_KEY_FAILURES_PER_IP
            with pytest.raises(Unauthorized):
                guesser.knowledge_bases.list()
        with pytest.raises(RateLimited) as limited:
            guesser.knowledge_bases.list()
    assert limited.value.status == 429 and limited.value.retry_after > 0
    with Loci(base, keys["alice"], headers={"X-Forwarded-For": "10.0.0.2"}) as locked, pytest.raises(RateLimited):
        locked.knowledge_bases.list()  # the right key too, from that address, until the window ends
    with Loci(base, keys["alice"]) as alice:
        assert alice.knowledge_bases.list()  # other addresses are not affected


def test_scopes_and_metadata_through_the_client(server):
    base, keys = server
    with Loci(base, keys["alice"]) as loci:
        loci.memories.add("u5", "build", turns("The release build fails on the sitemap step.",
                                               "I fixed the sitemap generator; the release builds again."),
                          kb="conversations", agent_id="code-bot", group_id="web", metadata={"repo": "site"})
        loci.memories.flush("u5", "build", kb="conversations")
        query = dict(method="keyword", top_k=5)
        unscoped = loci.search("sitemap generator", filters={"user_id": "u5"}, **query)
        assert not unscoped["facts"] and not unscoped["episodes"]  # a user-level search names no agent
        found = loci.search("sitemap generator", filters={"user_id": "u5", "agent_id": "code-bot", "group_id": "web",
                                                          "metadata": {"repo": ["site", "docs"]}}, **query)
        assert found["facts"] or found["episodes"]
        page = loci.memories.list(user_id="u5", agent_id="code-bot")
        assert page["count"] >= 1 and page["results"][0]["metadata"] == {"repo": "site"}
        with pytest.raises(BadRequest):
            loci.search("x", filters={"metadata": {"repo": {"near": 1}}})
