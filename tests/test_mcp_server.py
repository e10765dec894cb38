"""The MCP server, driven by the official SDK's own client over both transports.

- stdio: `manage.py mcp` spawned by the SDK's stdio client, over a migrated var dir (file-backed SQLite)
  that the setup process filled through the domain actions;
- streamable HTTP: a real uvicorn process serving loci.asgi (what `manage.py up` serves), at /mcp.

Alice's key reads and writes all of acme; the notes key only acme's "notes" KB; nothing of globex is
visible to either.
"""

import asyncio
import json
import subprocess
import traceback

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.worker_process import PYTHON, REPO, app_env, free_port, manage, stop_milvus_lite

pytestmark = pytest.mark.slow

TOOLS = {"add_messages", "flush", "search", "get_memory", "update_memory", "delete_memory", "upload_document",
         "document_status", "list_knowledge_bases", "list_memories", "memory_history", "get_profile",
         "record_feedback", "extraction_job"}

# Run in `manage.py shell`: tenants, keys and one remembered session per KB, through the domain actions.
SETUP = """
import datetime, json
from conversations.actions import accumulate_messages, flush_session
from tenants.access import permitted_scope
from tenants.models import ApiKey, KnowledgeBase, Tenant

acme = Tenant.objects.create(slug="acme", name="Acme")
conversations = KnowledgeBase.objects.create(tenant=acme, slug="conversations", name="Conversations")
notes = KnowledgeBase.objects.create(tenant=acme, slug="notes", name="Notes")
globex = Tenant.objects.create(slug="globex", name="Globex")
secret = KnowledgeBase.objects.create(tenant=globex, slug="secret", name="Secret")
alice_key, alice = ApiKey.issue(acme, "alice", can_write=True)
_, notes_only = ApiKey.issue(acme, "notes-only", can_write=True, knowledge_bases=[notes])
_, globex_key = ApiKey.issue(globex, "globex", can_write=True)
_, reader = ApiKey.issue(acme, "reader")  # read-only, every KB of acme
_, limited = ApiKey.issue(acme, "limited")  # the allowances' test alone uses these two
_, frugal = ApiKey.issue(acme, "frugal")

def remember(key, kb, session, *lines):
    scope = permitted_scope(key, write=True)
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": text,
              "timestamp": datetime.datetime(2024, 6, 1, 10, i, tzinfo=datetime.timezone.utc)}
             for i, text in enumerate(lines)]
    accumulate_messages(scope, kb, user_id="setup", session_id=session, messages=turns)
    flush_session(scope, kb, user_id="setup", session_id=session)

remember(alice_key, conversations, "regatta", "I crewed in the Marseille sailing regatta in June.",
         "Great, how did the regatta go?")
remember(alice_key, notes, "pottery", "I started a pottery class on Thursdays.", "Nice, what do you make?")
remember(ApiKey.objects.get(name="globex"), secret, "merger", "The Initech merger closes in October.", "Noted.")
from memory.models import Memory
Memory.objects.create(tenant=acme, kb=conversations, kind="profile", user_id="setup", text="Lives in Marseille.",
                      metadata={"subject": "user", "category": "home", "value": "Marseille"})
print(json.dumps({"alice": alice, "notes_only": notes_only, "globex": globex_key, "reader": reader,
                  "limited": limited, "frugal": frugal}))
"""


@pytest.fixture(scope="module")
def installation(tmp_path_factory):
    var = tmp_path_factory.mktemp("mcp")
    env = app_env(var)
    manage(env, "migrate", "--no-input", "-v", "0")
    keys = json.loads(manage(env, "shell", "-c", SETUP).stdout.strip().splitlines()[-1])
    yield env, keys
    stop_milvus_lite(var)


@pytest.fixture(scope="module")
def web(installation):
    """uvicorn serving loci.asgi over the installation; yields the MCP URL."""
    env, _ = installation
    port = free_port()
    proc = subprocess.Popen([PYTHON, "-m", "uvicorn", "loci.asgi:application", "--host", "127.0.0.1", "--port",
                             str(port), "--no-access-log"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for line in proc.stderr:
            if "Uvicorn running on" in line:
                break
        else:
            raise AssertionError(f"uvicorn exited {proc.wait()} before serving")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def stdio(env, key: str) -> Client:
    return Client(StdioServerParameters(command=PYTHON, args=["manage.py", "mcp"], env={**env, "LOCI_API_KEY": key},
                                        cwd=str(REPO)))


def http(url: str, key: str | None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    client = create_mcp_http_client(headers=headers)
    return client, Client(streamable_http_client(url, http_client=client))


async def call(client: Client, tool: str, **arguments) -> dict:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def refusal(client: Client, tool: str, **arguments) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text


def texts(response: dict) -> list[str]:
    items = [f["atomic_fact"] for f in response["facts"]] + [e["summary"] for e in response["episodes"]]
    items += [f["atomic_fact"] for e in response["episodes"] for f in e["atomic_facts"]]
    return items + [c["text"] for c in response.get("chunks", [])]


def all_facts(response: dict) -> list[dict]:
    """Facts at the top level (hybrid) and nested under their episodes (keyword, vector)."""
    return response["facts"] + [f for e in response["episodes"] for f in e["atomic_facts"]]


def turns(*lines: str) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text, "timestamp": f"2024-05-01T09:0{i}:00Z"}
            for i, text in enumerate(lines)]


# --- stdio -------------------------------------------------------------------------------------------------------


def test_stdio_wait_false_answers_with_a_job_and_wait_extracts_in_the_call(installation):
    """Where extraction is queued (as with an LLM; here asked for with LOCI_ASYNC_EXTRACTION=always)."""
    env, keys = installation

    async def scenario():
        async with stdio({**env, "LOCI_ASYNC_EXTRACTION": "always"}, keys["alice"]) as client:
            lines = turns("I repaired my grandfather's clock last weekend.", "Does it keep time now?")
            queued = await call(client, "add_messages", user_id="u7", session_id="clock", messages=lines,
                                wait=False)
            assert queued["status"] == "queued" and queued["message_count"] == 2
            job = await call(client, "extraction_job", job_id=queued["job_id"])
            assert (job["status"], job["kind"], job["result"]) == ("pending", "accumulate", None)
            flushed = await call(client, "flush", user_id="u7", session_id="clock")  # wait: extracted here
            assert flushed["status"] == "extracted" and flushed["episodes"] == 1 and flushed["kb"] == "conversations"
            done = await call(client, "extraction_job", job_id=flushed["job_id"])
            assert done["status"] == "done" and done["result"]["episodes"] == 1
            assert "not a job id" in await refusal(client, "extraction_job", job_id="nope")

    asyncio.run(scenario())

def test_stdio_adds_flushes_searches_edits_and_deletes_memories_with_their_sources(installation):
    env, keys = installation

    async def scenario():
        async with stdio(env, keys["alice"]) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            added = await call(client, "add_messages", user_id="u1", session_id="dogs", kb="conversations",
                               messages=turns("I adopted a greyhound named Biscuit last spring.",
                                              "Lovely, how is Biscuit settling in?"))
            assert added["status"] == "accumulated" and added["kb"] == "conversations"
            flushed = await call(client, "flush", user_id="u1", session_id="dogs", kb="conversations")
            assert flushed["status"] == "extracted" and flushed["episodes"] == 1

            for method in ("keyword", "vector", "hybrid", "agentic"):
                found = await call(client, "search", query="greyhound Biscuit", method=method,
                                   filters={"session_id": "dogs"})
                assert any("greyhound" in t for t in texts(found)), (method, found)
                fact = all_facts(found)[0]
                assert fact["sources"] and fact["sources"][0]["type"] == "message"
                assert fact["sources"][0]["session_id"] == "dogs"
            assert texts(await call(client, "search", query="greyhound", filters={"session_id": "elsewhere"})) == []
            one = await call(client, "search", query="greyhound Biscuit", method="hybrid", top_k=1,
                             memory_types=["atomic_fact"])
            assert len(all_facts(one)) == 1
            assert "'top_k' must be an integer" in await refusal(client, "search", query="x", top_k=1000)

            fact_id = all_facts(one)[0]["id"]
            assert (await call(client, "get_memory", memory_id=fact_id))["session_id"] == "dogs"
            edited = await call(client, "update_memory", memory_id=fact_id,
                                text="User adopted a whippet named Biscuit.")
            assert edited["text"] == "User adopted a whippet named Biscuit."
            assert "whippet" in " ".join(texts(await call(client, "search", query="whippet", method="keyword")))
            episode_id = all_facts(one)[0]["parent_episode_id"]
            assert (await call(client, "delete_memory", memory_id=episode_id))["deleted"] >= 2  # with its facts
            assert "No memory" in await refusal(client, "get_memory", memory_id=fact_id)
            assert texts(await call(client, "search", query="whippet", method="keyword")) == []

            uploaded = await call(client, "upload_document", kb="notes", filename="plan.txt",
                                  text="The garden plan: tomatoes along the south wall.")
            assert uploaded["duplicate"] is False and uploaded["document"]["kb"] == "notes"
            status = await call(client, "document_status", document_id=uploaded["document"]["id"])
            assert status["filename"] == "plan.txt" and status["status"] == "queued"  # no worker runs here
            kbs = await call(client, "list_knowledge_bases")
            assert kbs["tenant"] == "acme" and [k["slug"] for k in kbs["knowledge_bases"]] == ["conversations", "notes"]

    asyncio.run(scenario())
    history = manage(env, "shell", "-c", "from memory.models import MemoryHistory as H; "
                                         "print([(h.event, h.old_text, h.new_text) for h in H.objects.filter("
                                         "new_text__contains='whippet')])").stdout
    assert "'UPDATE', 'User adopted a greyhound named Biscuit last spring." in history


def test_stdio_a_key_limited_to_one_kb_sees_only_that_kb(installation):
    env, keys = installation

    async def scenario():
        async with stdio(env, keys["notes_only"]) as client:
            kbs = await call(client, "list_knowledge_bases")
            assert [k["slug"] for k in kbs["knowledge_bases"]] == ["notes"]
            assert any("pottery" in t for t in texts(await call(client, "search", query="pottery class")))
            for method in ("keyword", "vector", "hybrid"):  # the other KB's and the other tenant's memories
                found = await call(client, "search", query="sailing regatta Marseille merger", method=method)
                assert not any("regatta" in t or "merger" in t for t in texts(found)), (method, found)
            assert "Unknown knowledge base" in await refusal(client, "search", query="regatta",
                                                             filters={"kb": ["conversations"]})
            assert "Unknown knowledge base" in await refusal(client, "add_messages", user_id="u", session_id="s",
                                                             kb="conversations", messages=turns("hello there"))

    asyncio.run(scenario())


def test_stdio_a_key_spends_the_same_search_allowances_as_on_the_rest_api(installation):
    """MCP is no way round LOCI_RATE_LIMIT_SEARCH or LOCI_SEARCH_CPU_PER_MINUTE: past them a search is refused
    with the REST API's reason, while the key's other tools and other keys go on."""
    env, keys = installation

    async def scenario(key, limits, searches_allowed, setting):
        async with stdio({**env, **limits}, key) as client:
            for _ in range(searches_allowed):
                await call(client, "search", query="pottery class")
            reason = await refusal(client, "search", query="pottery class")
            assert setting in reason and "this API key" in reason and "try again in" in reason, reason
            assert (await call(client, "list_knowledge_bases"))["knowledge_bases"]  # not a search: allowed

    asyncio.run(scenario(keys["limited"], {"LOCI_RATE_LIMIT_SEARCH": "2/min"}, 2, "LOCI_RATE_LIMIT_SEARCH"))
    # The first search spends the whole CPU allowance; the next one is refused.
    asyncio.run(scenario(keys["frugal"], {"LOCI_SEARCH_CPU_PER_MINUTE": "0.000001"}, 1, "LOCI_SEARCH_CPU_PER_MINUTE"))


def test_stdio_a_bad_key_is_refused_before_serving(installation):
    env, _ = installation
    proc = subprocess.run([PYTHON, "manage.py", "mcp", "--api-key", "loci_000000000000_nope"], cwd=REPO, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Invalid or revoked API key." in proc.stderr
    assert proc.stdout == ""  # nothing on the protocol stream

    async def connect():
        async with stdio(env, "loci_000000000000_nope") as client:
            await client.list_tools()

    with pytest.raises(Exception):
        asyncio.run(connect())


def test_stdio_a_read_only_key_lists_reads_history_and_profiles_but_cannot_write(installation):
    env, keys = installation

    async def scenario():
        async with stdio(env, keys["reader"]) as client:
            facts = await call(client, "list_memories", memory_type="atomic_fact", user_id="setup")
            assert facts["count"] >= 2 and {m["memory_type"] for m in facts["results"]} == {"atomic_fact"}
            assert any("regatta" in m["text"] for m in facts["results"])
            assert any("regatta" in t for t in texts(await call(client, "search", query="sailing regatta")))
            history = await call(client, "memory_history", memory_id=facts["results"][0]["id"])
            assert history["history"][0]["event"] == "ADD" and history["history"][0]["before"] is None
            profile = await call(client, "get_profile", user_id="setup")
            assert [(i["category"], i["value"]) for i in profile["items"]] == [("home", "Marseille")]
            listed = await call(client, "list_memories", memory_type="profile")
            assert [m["text"] for m in listed["results"]] == ["Lives in Marseille."]
            assert "No profile for user 'nobody'." in await refusal(client, "get_profile", user_id="nobody")
            assert "Use one of" in await refusal(client, "list_memories", memory_type="chunk")
            assert "This API key is read-only." in await refusal(
                client, "add_messages", user_id="u", session_id="s", kb="conversations", messages=turns("hello there"))
            assert "This API key is read-only." in await refusal(client, "delete_memory",
                                                                 memory_id=facts["results"][0]["id"])

    asyncio.run(scenario())


# --- streamable HTTP ---------------------------------------------------------------------------------------------

def test_http_adds_flushes_and_searches_with_sources(installation, web):
    _, keys = installation

    async def scenario():
        transport, mcp_client = http(web, keys["alice"])
        async with transport, mcp_client as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            await call(client, "add_messages", user_id="u2", session_id="bikes", kb="conversations",
                       messages=turns("My touring bicycle is a green Surly.", "Nice, where do you ride it?"))
            assert (await call(client, "flush", user_id="u2", session_id="bikes"))["status"] == "extracted"
            found = await call(client, "search", query="green Surly bicycle", method="hybrid", top_k=5,
                               filters={"kb": ["conversations"], "user_id": "u2"})
            assert any("Surly" in t for t in texts(found))
            item = (found["facts"] or found["episodes"])[0]
            assert {"type": "message", "session_id": "bikes"}.items() <= item["sources"][0].items()
            assert found["query"]["filters_applied"]["kb"] == ["conversations"]

    asyncio.run(scenario())


def test_http_a_key_limited_to_one_kb_sees_only_that_kb(installation, web):
    _, keys = installation

    async def scenario():
        transport, mcp_client = http(web, keys["notes_only"])
        async with transport, mcp_client as client:
            kbs = await call(client, "list_knowledge_bases")
            assert [k["slug"] for k in kbs["knowledge_bases"]] == ["notes"]
            # A query both KBs' memories match; the notes one well enough to pass the floor with the
            # late-interaction stage (on by default): a one-word match of four ("sailing regatta
            # Marseille pottery") scores under 0.01 there, and isolation, not the floor, is tested here.
            found = await call(client, "search", query="my pottery class on Thursdays, and the sailing regatta",
                               method="hybrid")
            assert any("pottery" in t for t in texts(found))
            assert not any("regatta" in t for t in texts(found))

    asyncio.run(scenario())


@pytest.mark.parametrize("key, message", [
    (None, "Send your API key as 'Authorization: Bearer <key>'."),
    ("loci_000000000000_nope", "Invalid or revoked API key."),
])
def test_http_a_missing_or_bad_key_is_refused_with_401_and_says_why(installation, web, key, message):
    headers = {"Accept": "application/json, text/event-stream", **({"Authorization": f"Bearer {key}"} if key else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx.post(web, json=body, headers=headers, timeout=30)
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}

    async def connect():
        transport, mcp_client = http(web, key)
        async with transport, mcp_client as client:
            await client.list_tools()

    # The SDK's client raises the server's reason (an MCPError with its message) where it used to raise
    # "Server returned an error response"; its own task groups still wrap it in an exception group.
    with pytest.raises(Exception) as raised:
        asyncio.run(connect())
    assert message in "".join(traceback.format_exception(raised.value))
    leaves = [raised.value]
    while isinstance(leaves[0], BaseExceptionGroup):
        leaves = list(leaves[0].exceptions)
    assert [str(e) for e in leaves] == [message], leaves


def test_stdio_scopes_and_metadata_are_written_and_filtered(installation):
    env, keys = installation

    async def scenario():
        async with stdio(env, keys["alice"]) as client:
            await call(client, "add_messages", user_id="u9", session_id="trip", kb="conversations",
                       agent_id="travel-bot", run_id="r7", metadata={"category": "travel", "nights": 3},
                       messages=turns("Book the Kyoto ryokan for three nights in April.", "Booked the ryokan."))
            await call(client, "flush", user_id="u9", session_id="trip", kb="conversations")
            query = {"query": "Kyoto ryokan", "method": "keyword"}
            assert texts(await call(client, "search", **query, filters={"user_id": "u9"})) == []  # no agent named
            mine = await call(client, "search", **query, filters={"user_id": "u9", "agent_id": "travel-bot",
                                                                   "run_id": "r7", "metadata": {"nights": {"gte": 3}}})
            assert any("ryokan" in t for t in texts(mine))
            assert texts(await call(client, "search", **query, filters={
                "agent_id": "*", "metadata": {"category": "work"}})) == []
            assert "keys must start with a letter" in await refusal(client, "search", query="x", filters={
                "metadata": {"a b": 1}})

            # An agent case from a transcript with a tool call; feedback on it through the tool.
            steps = turns("Book the Kyoto ryokan for April.", '{"name": "reserve", "arguments": {"hotel": "ryokan"}}',
                          "reservation confirmed", "Booked the ryokan for April.")
            steps[2]["role"], steps[2]["sender_name"] = "tool", "reserve"
            await call(client, "add_messages", user_id="u9", session_id="book", kb="conversations",
                       agent_id="travel-bot", messages=steps)
            await call(client, "flush", user_id="u9", session_id="book", kb="conversations")
            found = await call(client, "search", query="book the Kyoto ryokan", memory_types=["agent_case"],
                               filters={"user_id": "u9", "agent_id": "travel-bot"})
            case = found["agent_memory"][0]
            assert case["memory_type"] == "agent_case" and case["tools"] == ["reserve"]
            after = await call(client, "record_feedback", memory_id=case["id"], outcome="failure", note="wrong dates")
            assert after["quality"] < case["quality"]
            episode = all_facts(mine)[0]["parent_episode_id"] if all_facts(mine) else mine["episodes"][0]["id"]
            assert "agent cases and agent skills" in await refusal(client, "record_feedback", memory_id=episode,
                                                                   outcome="success")

    asyncio.run(scenario())
