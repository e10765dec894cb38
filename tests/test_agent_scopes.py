"""Scopes (agent, group, run) and user metadata through the REST API, on real indexes (SQLite FTS5 and
Milvus Lite): written with the messages or the upload, kept on every memory and index row, filtered
inside the engines for every search method."""

import io
from datetime import datetime, timedelta, timezone

import pytest

from ingest.tasks import run_inline
from memory.models import Document, Memory, Message
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter
from tests.conftest import api_client

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")

T0 = datetime(2024, 3, 4, 9, 0, tzinfo=timezone.utc)
HOSTILE_TAG = 'x" or tenant_id > 0 or "\\\' OR 1=1 --'


def turns(prefix, lines, start=T0):
    return [{"message_id": f"{prefix}{i}", "role": role, "sender_id": role, "content": text,
             "timestamp": (start + timedelta(minutes=i)).isoformat()} for i, (role, text) in enumerate(lines)]


TRAVEL = [("user", "Please book me a hotel in Kyoto near the station for the conference in May."),
          ("assistant", "I booked the Granvia hotel in Kyoto for May 12 to May 15.")]
WORK = [("user", "My manager approved the Kyoto conference budget of 1200 euros."),
        ("user", "I prefer aisle seats on every flight.")]
CODE = [("user", "The Kyoto conference website build fails on the sitemap step."),
        ("assistant", "I fixed the sitemap generator and the Kyoto site builds again.")]


@pytest.fixture
def alice(world):
    return api_client(world.alice_key)


def write(client, committed, session, lines, **scope):
    body = {"user_id": "u1", "session_id": session, "messages": turns(session, lines), **scope}
    response = committed(client.post, "/api/v1/memories", body, format="json")
    assert response.status_code == 200, response.content
    flushed = committed(client.post, "/api/v1/memories/flush", {"user_id": "u1", "session_id": session}, format="json")
    assert flushed.status_code == 200 and flushed.json()["status"] == "extracted", flushed.content


def sessions(client, query="Kyoto conference", method="hybrid", **filters):
    """The sessions whose memories a search finds (episodes and facts)."""
    response = client.post("/api/v1/memories/search", {"query": query, "method": method, "top_k": 50,
                                                        "filters": {"user_id": "u1", **filters}}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    ids = [item["id"] for item in body["episodes"] + body["facts"]]
    return set(Memory.objects.filter(pk__in=ids).values_list("session_id", flat=True))


@pytest.fixture
def three_scopes(alice, committed):
    write(alice, committed, "travel", TRAVEL, agent_id="travel-bot", run_id="trip-1",
          metadata={"category": "travel", "chapter": 2})
    write(alice, committed, "work", WORK, metadata={"category": "work", "chapter": 3.5})
    write(alice, committed, "code", CODE, agent_id="code-bot", group_id="web-team",
          metadata={"category": "travel", "source": HOSTILE_TAG})
    return alice


@pytest.mark.parametrize("method", ["hybrid", "keyword", "vector"])
def test_an_agents_memories_are_found_by_that_agent_and_by_a_user_search_only_when_asked(three_scopes, method):
    client = three_scopes
    assert sessions(client, method=method) == {"work"}  # a user-level search: memories of no agent
    assert sessions(client, method=method, agent_id="travel-bot") == {"travel"}
    assert sessions(client, method=method, agent_id="code-bot") == {"code"}
    assert sessions(client, method=method, agent_id="*") == {"travel", "work", "code"}
    assert sessions(client, method=method, agent_id="*", group_id="web-team") == {"code"}
    assert sessions(client, method=method, agent_id="*", run_id="trip-1") == {"travel"}
    assert sessions(client, method=method, agent_id="nobody") == set()


@pytest.mark.parametrize("method", ["hybrid", "keyword", "vector"])
def test_metadata_filters_run_in_the_engine(three_scopes, method):
    client = three_scopes
    assert sessions(client, method=method, agent_id="*", metadata={"category": "travel"}) == {"travel", "code"}
    assert sessions(client, method=method, agent_id="*", metadata={"category": ["work", "none"]}) == {"work"}
    assert sessions(client, method=method, agent_id="*", metadata={"chapter": {"gte": 3}}) == {"work"}
    assert sessions(client, method=method, agent_id="*", metadata={"chapter": {"gt": 1, "lt": 3}}) == {"travel"}
    assert sessions(client, method=method, agent_id="*", metadata={"chapter": 2.0}) == {"travel"}
    assert sessions(client, method=method, agent_id="*", metadata={"chapter": "2"}) == set()  # a string is not 2
    # A hostile value is only ever a value: it finds exactly the row holding it, and nothing else.
    assert sessions(client, method=method, agent_id="*", metadata={"source": HOSTILE_TAG}) == {"code"}
    assert sessions(client, method=method, agent_id="*", metadata={"source": "x"}) == set()


def test_every_memory_and_index_row_carries_its_scope_and_metadata(world, three_scopes):
    travel = Memory.objects.filter(session_id="travel")
    assert travel.count() >= 2
    assert {(m.agent_id, m.run_id, m.group_id) for m in travel} == {("travel-bot", "trip-1", "")}
    assert all(m.user_metadata == {"category": "travel", "chapter": 2} for m in travel)
    listed = three_scopes.get("/api/v1/memories", {"agent_id": "code-bot"}).json()["results"]
    assert listed and {(m["agent_id"], m["group_id"], m["metadata"]["category"]) for m in listed} == {
        ("code-bot", "web-team", "travel")}
    ids = tuple(f"memory:{m.pk}" for m in travel)
    for index in (vector_index(), keyword_index()):
        flt = IndexFilter(tenant_id=world.acme.pk, kb_ids=(world.docs.pk,), ids=ids, agent_id="travel-bot",
                          run_id="trip-1")
        assert set(index.ids(flt)) == set(ids)
        assert list(index.ids(IndexFilter(tenant_id=world.acme.pk, kb_ids=(world.docs.pk,), ids=ids,
                                          agent_id=""))) == []


def test_turns_of_different_agents_in_one_session_become_memories_of_their_own(alice, committed):
    body = {"user_id": "u1", "session_id": "mixed", "messages": turns("a", TRAVEL), "agent_id": "travel-bot"}
    committed(alice.post, "/api/v1/memories", body, format="json")
    body = {"user_id": "u1", "session_id": "mixed", "messages": turns("b", WORK, T0 + timedelta(minutes=5))}
    committed(alice.post, "/api/v1/memories", body, format="json")
    committed(alice.post, "/api/v1/memories/flush", {"user_id": "u1", "session_id": "mixed"}, format="json")
    episodes = Memory.objects.filter(session_id="mixed", kind="episode")
    assert sorted(e.agent_id for e in episodes) == ["", "travel-bot"]
    for episode in episodes:
        said = Message.objects.filter(session_id="mixed", message_id__in=episode.source_message_ids)
        assert {m.agent_id for m in said} == {episode.agent_id}


@pytest.mark.parametrize("body,reason", [
    ({"agent_id": "*"}, "reserved"),
    ({"metadata": {"bad key": 1}}, "keys must start with a letter"),
    ({"metadata": {"k": [1, 2]}}, "strings or numbers"),
    ({"metadata": {f"k{n}": n for n in range(17)}}, "at most 16 keys"),
    ({"metadata": {"k": "x" * 201}}, "at most 200 characters"),
])
def test_bad_scopes_or_metadata_on_messages_are_refused(alice, body, reason):
    response = alice.post("/api/v1/memories", {"user_id": "u1", "session_id": "s", "messages": turns("m", WORK),
                                               **body}, format="json")
    assert response.status_code == 400 and reason in response.content.decode(), response.content
    assert not Message.objects.exists()


def test_a_documents_metadata_reaches_its_chunks_and_memories(world, alice, committed):
    text = b"Quarterly travel policy\n\nEmployees book hotels through the portal. Kyoto trips need approval."
    response = committed(alice.post, "/api/v1/documents", {
        "kb": "docs", "files": [io.BytesIO(text)], "metadata": '{"category": "policy", "year": 2024}'},
        format="multipart")
    assert response.status_code == 201, response.content
    document = Document.objects.get()
    assert document.user_metadata == {"category": "policy", "year": 2024}
    assert run_inline(document.pk).status == "ready"

    def found(**metadata):
        body = {"query": "Kyoto trips approval", "method": "keyword", "memory_types": ["chunk", "atomic_fact"],
                "filters": {"metadata": metadata}}
        data = alice.post("/api/v1/memories/search", body, format="json").json()
        return len(data["facts"]) + len(data.get("chunks", []))

    assert found(category="policy") > 0 and found(year={"gte": 2024}) > 0
    assert found(category="travel") == 0 and found(year={"lt": 2024}) == 0
    bad = alice.post("/api/v1/documents", {"kb": "docs", "files": [io.BytesIO(b"other")], "metadata": "[1]"},
                     format="multipart")
    assert bad.status_code == 400 and "must be an object" in bad.content.decode()


def test_an_agent_scoped_search_still_sees_the_users_profile(alice, committed):
    said = [{"message_id": "p1", "sender_name": "Maya", "sender_id": "maya", "content":
             "I work as a nurse at the city hospital.", "timestamp": T0.isoformat()}]
    committed(alice.post, "/api/v1/memories", {"user_id": "u1", "session_id": "me", "messages": said}, format="json")
    committed(alice.post, "/api/v1/memories/flush", {"user_id": "u1", "session_id": "me"}, format="json")

    def profile(**filters):
        body = alice.post("/api/v1/memories/search", {"query": "Where does Maya work as a nurse?", "filters": {
            "user_id": "u1", **filters}}, format="json").json()
        return {item["id"] for item in body["profiles"]}

    assert profile() and profile(agent_id="travel-bot") == profile() == profile(group_id="web-team")
