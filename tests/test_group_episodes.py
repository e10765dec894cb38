"""Group and personal episodes through the REST API on real indexes: a team chat's MemCell is one group
episode plus a personal episode per person who said something of their own; facts keep their speaker;
a search for one participant ranks their own episodes and facts first."""

from datetime import datetime, timedelta, timezone

import pytest

from memory.models import Memory
from tests.conftest import api_client
from tests.fake_openai import fake_openai  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")

T0 = datetime(2024, 9, 2, 9, 30, tzinfo=timezone.utc)
STANDUP = [
    ("Alice", "Morning team. I finished the payment webhook retries and opened the pull request."),
    ("Bob", "I will review the webhook pull request after lunch and then start the invoice export."),
    ("Chen", "I am blocked on the staging database migration, the schema lock times out."),
    ("Dana", "Thanks Alice!"),
    ("Alice", "Chen, try running the migration outside business hours when the lock is free."),
    ("Chen", "Good idea, I will rerun the staging migration tonight."),
]


@pytest.fixture
def alice(world):
    return api_client(world.alice_key)


def post_chat(client, committed, lines, *, group="team-7", session="standup"):
    messages = [{"message_id": f"{session}-{i}", "sender_id": who.lower(), "sender_name": who, "content": text,
                 "timestamp": (T0 + timedelta(minutes=i)).isoformat()} for i, (who, text) in enumerate(lines)]
    # wait: where a model is configured the extraction would be queued; these tests read its memories at once.
    body = {"user_id": "team-owner", "session_id": session, "group_id": group, "messages": messages, "wait": True}
    assert committed(client.post, "/api/v1/memories", body, format="json").status_code == 200
    flushed = committed(client.post, "/api/v1/memories/flush",
                        {"user_id": "team-owner", "session_id": session, "wait": True}, format="json")
    assert flushed.status_code == 200, flushed.content
    assert Memory.objects.filter(session_id=session, kind="episode").exclude(
        metadata__episode_type="personal").count() == 1


def test_a_team_chat_yields_a_group_episode_and_personal_ones(alice, committed):
    post_chat(alice, committed, STANDUP)
    episodes = Memory.objects.filter(kind="episode")
    group = [e for e in episodes if e.metadata.get("episode_type") == "group"]
    personal = {e.metadata["participant"]: e for e in episodes if e.metadata.get("episode_type") == "personal"}
    assert len(group) == 1 and group[0].metadata["people"] == ["Alice", "Bob", "Chen", "Dana"]
    assert set(personal) == {"Alice", "Bob", "Chen"}  # Dana only said thanks
    chen = personal["Chen"]
    assert "staging database migration" in chen.text and "rerun the staging migration tonight" in chen.text
    assert "webhook" not in chen.text  # only what Chen said
    assert chen.source_message_ids == ["standup-2", "standup-5"] and chen.group_id == "team-7"
    assert chen.metadata["group_episode_id"] == str(group[0].pk)
    facts = Memory.objects.filter(kind="atomic_fact")
    assert facts and all(f.metadata.get("subject") or ":" in f.text for f in facts)
    chen_facts = [f for f in facts if "staging" in f.text]
    assert chen_facts and all(f.text.startswith("Chen") or f.metadata.get("subject") == "Chen" for f in chen_facts)
    # Deleting the group episode takes its facts and the personal episodes along.
    assert committed(alice.delete, f"/api/v1/memories/{group[0].pk}").status_code == 200
    assert not Memory.objects.filter(kind="episode").exists()


def test_a_search_scoped_to_a_participant_prefers_their_episodes(alice, committed):
    post_chat(alice, committed, STANDUP)

    def top(participant=None):
        filters = {"group_id": "team-7", **({"participant": participant} if participant else {})}
        body = alice.post("/api/v1/memories/search", {"query": "what is the plan for the webhook and the migration",
                                                      "memory_types": ["episode"], "filters": filters},
                          format="json").json()
        return body["episodes"][0]

    for who in ("Chen", "Bob", "Alice"):
        best = top(who)
        memory = Memory.objects.get(pk=best["id"])
        assert memory.metadata.get("participant") == who and best["scores"]["participant"] > 0 and best["rank"] == 1


def test_a_chat_of_two_without_a_group_stays_one_episode(alice, committed):
    messages = [{"message_id": f"p{i}", "sender_name": who, "sender_id": who.lower(), "content": text,
                 "timestamp": (T0 + timedelta(minutes=i)).isoformat()}
                for i, (who, text) in enumerate(STANDUP[:3])]
    body = {"user_id": "u1", "session_id": "pair", "messages": messages[:2], "wait": True}
    committed(alice.post, "/api/v1/memories", body, format="json")
    committed(alice.post, "/api/v1/memories/flush", {"user_id": "u1", "session_id": "pair", "wait": True}, format="json")
    assert Memory.objects.filter(kind="episode").count() == 1
    assert "episode_type" not in Memory.objects.get(kind="episode").metadata


def test_the_llm_path_gives_the_same_structure(alice, committed, fake_openai):  # noqa: F811
    import json

    fake_openai.queue_chat(json.dumps({"boundaries": [], "should_wait": False}))
    fake_openai.queue_json({
        "topic": "Platform team standup",
        "summary": "At the standup Alice reported the webhook retries, Bob planned the review and Chen was "
                   "blocked on the staging migration.",
        "facts": [{"text": "Alice finished the payment webhook retries.", "sources": [1], "occurred_at": None},
                  {"text": "Bob will review the webhook pull request after lunch.", "sources": [2], "occurred_at": None},
                  {"text": "Chen is blocked on the staging database migration.", "sources": [3], "occurred_at": None},
                  {"text": "Chen will rerun the staging migration tonight.", "sources": [6], "occurred_at": None}]})
    post_chat(alice, committed, STANDUP)
    group = Memory.objects.get(kind="episode", metadata__episode_type="group")
    assert group.extraction_mode == "llm" and group.text.startswith("At the standup")
    personal = {e.metadata["participant"]: e for e in Memory.objects.filter(kind="episode",
                                                                            metadata__episode_type="personal")}
    assert set(personal) == {"Alice", "Bob", "Chen"}
    assert "Chen is blocked on the staging database migration." in personal["Chen"].text
    assert personal["Chen"].extraction_mode == "llm"
