"""The Python client library against a real `manage.py up` (uvicorn, a Celery worker, Milvus Lite): one per module.

Alice's key reads and writes all of acme, the docs key only its "docs" KB, the reader key only reads.
Failed keys are counted per address: the server trusts one X-Forwarded-For hop, so the lock-out test
locks out an address of its own and nobody else.
"""

import asyncio
import glob
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

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
    # LOCI_ASYNC_EXTRACTION=always: the extraction of POST /memories and flush goes through the queue, as
    # where an LLM is configured, so the clients' `wait` polls jobs that the real worker runs.
    env = app_env(var, LOCI_MAX_UPLOAD_MB="1", LOCI_TRUSTED_PROXIES="1", LOCI_API_KEY_FAILURES_PER_IP="2",
                  LOCI_WEBHOOK_ALLOWED_HOSTS="127.0.0.1", LOCI_ASYNC_EXTRACTION="always")
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
        flushed = loci.memories.flush("u1", "dogs", kb="conversations")
        assert flushed["status"] == "extracted" and flushed["job_id"]  # the worker's job, awaited by polling
        assert loci.memories.job(flushed["job_id"])["result"]["episodes"] == flushed["episodes"] == 1

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


def test_without_wait_a_queued_extraction_answers_with_its_job(server):
    base, keys = server
    with Loci(base, keys["alice"]) as loci:
        queued = loci.memories.add("u1", "cats", turns("My cat Tofu is afraid of the vacuum cleaner.",
                                                       "Poor Tofu! Does she hide?"), kb="conversations", wait=False)
        assert queued["status"] == "queued" and queued["message_count"] == 2 and queued["kb"] == "conversations"
        deadline = time.monotonic() + 120
        while (job := loci.memories.job(queued["job_id"]))["status"] not in ("done", "failed"):
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
        assert job["status"] == "done" and job["kind"] == "accumulate" and job["attempts"] == 1
        assert job["result"]["status"] in ("accumulated", "extracted")


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


def test_memory_edits_history_profiles_entities_and_export(server):
    base, keys = server
    with Loci(base, keys["alice"], kb="conversations") as loci:
        loci.memories.add("u5", "work", [{"sender_id": "u5", "sender_name": "Jon", "content": text,
                                          "timestamp": f"2024-05-01T09:0{i}:00Z"} for i, text in enumerate(
            ["I live in Boston with my wife.", "I work at Contoso as a data engineer."])])
        loci.memories.flush("u5", "work")
        fact = loci.search("Where does the user work?", filters={"user_id": "u5"})["facts"][0]
        edited = loci.memories.update(fact["id"], text="The user works at Contoso as a senior data engineer.")
        assert edited["text"].endswith("senior data engineer.")
        history = loci.memories.history(fact["id"])
        assert [h["event"] for h in history["history"]] == ["ADD", "UPDATE"]
        assert history["history"][1]["after"]["text"] == edited["text"]
        assert loci.memories.update(fact["id"], status="disabled")["status"] == "disabled"

        profile = loci.profiles.get("u5")
        assert profile["user_id"] == "u5" and "Boston" in json.dumps(profile["items"])
        with pytest.raises(NotFound):
            loci.profiles.get("nobody/../u5")  # one path segment, quoted
        entities = loci.entities.list(q="Contoso")
        assert entities["results"], entities
        assert loci.entities.get(entities["results"][0]["id"])["name"]

        records = loci.export(user_id="u5")
        assert records[0]["type"] == "loci-export"
        assert {r["user_id"] for r in records if r["type"] == "memory"} == {"u5"}
        assert loci.memories.delete_user("u5")["deleted"] >= 2
        assert loci.memories.list(user_id="u5")["count"] == 0


def test_documents_knowledge_bases_and_webhooks_are_managed_through_the_client(server, tmp_path):
    base, keys = server
    with Loci(base, keys["alice"]) as loci:
        kb = loci.knowledge_bases.create("scratch", "Scratch", description="for the client test")
        assert kb["slug"] == "scratch" and loci.knowledge_bases.get("scratch")["name"] == "Scratch"
        assert loci.knowledge_bases.update("scratch", name="Scratch pad")["name"] == "Scratch pad"
        path = tmp_path / "pad.txt"
        path.write_text("The scratch pad lists three errands: post office, bakery, pharmacy.\n")
        document = loci.documents.upload(path, kb="scratch")["document"]
        assert loci.documents.wait(document["id"], timeout=300, interval=0.5)["status"] == "ready"
        assert loci.documents.original(document["id"]) == path.read_bytes()
        assert loci.documents.chunks(document["id"])["results"][0]["text"].startswith("The scratch pad")
        listed = loci.documents.list(kb="scratch")
        assert [d["filename"] for d in listed["results"]] == ["pad.txt"]
        rerun = loci.documents.rerun(document["id"])
        assert rerun["status"] in ("queued", "parsing", "extracting", "indexing", "ready")
        assert loci.documents.wait(document["id"], timeout=300, interval=0.5)["status"] == "ready"
        with pytest.raises(LociError):
            loci.documents.cancel(document["id"])  # a finished document cannot be cancelled

        hook = loci.webhooks.create("http://127.0.0.1:9/hook", kb="scratch", events=["document.ready"])
        assert hook["secret"].startswith("whsec_")
        assert [h["id"] for h in loci.webhooks.list()] == [hook["id"]]
        assert loci.webhooks.update(hook["id"], is_active=False)["is_active"] is False
        assert loci.webhooks.deliveries(hook["id"])["results"] == []
        loci.webhooks.delete(hook["id"])
        with pytest.raises(BadRequest) as refused:
            loci.webhooks.create("http://10.1.2.3/hook")
        assert "not a public address" in refused.value.message
        assert not refused.value.message.startswith("url: url:")

        loci.knowledge_bases.delete("scratch")
        assert "scratch" not in [k["slug"] for k in loci.knowledge_bases.list()]
        assert [t["slug"] for t in loci.tenants.list()] == ["acme"]


def _python(version: str) -> str | None:
    found = shutil.which(f"python{version}")
    candidates = glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}"))
    for path in [*candidates, found]:
        if path and subprocess.run([path, "--version"], capture_output=True).returncode == 0:
            return path
    return None


CLIENT_SCRIPT = """
import json, sys
from loci_client import Loci, NotFound
base, key = sys.argv[1], sys.argv[2]
with Loci(base, key) as loci:
    loci.memories.add("u9", "s9", [{"role": "user", "content": "My cat Miso sleeps on the piano.",
                                    "timestamp": "2024-05-01T09:00:00Z"}], kb="conversations")
    loci.memories.flush("u9", "s9", kb="conversations")
    hit = loci.search("Where does Miso sleep?", filters={"user_id": "u9"})["facts"][0]
    try:
        loci.memories.get("00000000-0000-0000-0000-000000000000")
    except NotFound as exc:
        missing = str(exc)
    print(json.dumps({"fact": hit["atomic_fact"], "history": len(loci.memories.history(hit["id"])["history"]),
                      "missing": missing, "python": sys.version_info[:2]}))
"""


@pytest.mark.parametrize("version", ["3.12", "3.9"])
def test_the_client_installs_alone_in_a_fresh_venv_and_talks_to_the_server(server, tmp_path, version):
    python = _python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    base, keys = server
    venv = tmp_path / "venv"
    # Nothing of this checkout on the path: the venv must find the installed copy or nothing.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120, env=env)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                          str(Path(REPO) / "clients" / "python")], capture_output=True, text=True, timeout=600,
                         env=env)
    assert pip.returncode == 0, pip.stderr[-2000:]
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
                               capture_output=True, text=True, check=True, env=env).stdout
    names = {p["name"].lower() for p in json.loads(installed)}
    assert "loci-client" in names and "httpx" in names
    assert not names & {"django", "loci", "onnxruntime", "pymilvus", "celery"}  # the client alone
    run = subprocess.run([str(venv / "bin" / "python"), "-c", CLIENT_SCRIPT, base, keys["alice"]],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import loci_client; print(loci_client.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path).stdout
    assert where.startswith(str(venv))  # the installed copy, not the checkout's
    assert "piano" in out["fact"] and out["history"] == 1 and out["python"] == [int(v) for v in version.split(".")]
    assert out["missing"].startswith("404: ") and "error:" not in out["missing"]


def test_the_typescript_client_passes_its_tests_against_the_server(server):
    node, npm = shutil.which("node"), shutil.which("npm")
    if not (node and npm):
        pytest.skip("Node.js and npm are not installed")
    base, keys = server
    client = Path(REPO) / "clients" / "typescript"
    if not (client / "node_modules" / "typescript").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=client, check=True, timeout=600,
                       capture_output=True)
    build = subprocess.run([npm, "run", "build"], cwd=client, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    env = {**os.environ, "LOCI_URL": base, "LOCI_API_KEY": keys["alice"], "LOCI_READ_KEY": keys["reader"]}
    run = subprocess.run([node, "--test", "test/"], cwd=client, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-2000:]
    assert "# pass 4" in run.stdout and "# fail 0" in run.stdout and "# skipped 0" in run.stdout

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
