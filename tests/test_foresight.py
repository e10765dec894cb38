"""Foresight: plans, intentions, scheduled events and deadlines from chats, English (LoCoMo) and Chinese,
each with an absolute window; searchable as their own kind, demoted once expired, filtered by valid_at."""

import json
from datetime import date, datetime, timedelta, timezone

import pytest

from conversations.foresight import plan_foresight
from extraction.base import Passage
from extraction.foresight import extract_foresight, foresight_of
from memory.models import Memory, Message
from tests.conftest import SHARED_DATA, api_client
from tests.fake_openai import fake_openai  # noqa: F401  (fixture)
from tests.test_conversation_api import index_ids, ingest

LOCOMO = SHARED_DATA / "locomo" / "locomo10_dev.json"


def locomo_turns(conversation: int, session: int) -> tuple[datetime, list[dict]]:
    """One LoCoMo session: its start time and its turns."""
    conv = json.loads(LOCOMO.read_text())[conversation]["conversation"]
    when = datetime.strptime(conv[f"session_{session}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
    return when, conv[f"session_{session}"]


def turn(conversation: int, session: int, dia_id: str) -> tuple[datetime, str, str]:
    when, turns = locomo_turns(conversation, session)
    t = next(t for t in turns if t["dia_id"] == dia_id)
    return when, t["speaker"], t["text"]


def window(item) -> tuple[date, date]:
    return item.valid_from.date(), item.valid_until.date()


@pytest.mark.parametrize("where, expected", [
    ((0, 5, "D5:13"), (date(2023, 7, 3), date(2023, 8, 1))),    # "a conference this month": from the message on
    ((0, 14, "D14:33"), (date(2023, 9, 1), date(2023, 10, 1))),  # "an LGBTQ art show next month"
    ((0, 9, "D9:12"), (date(2023, 8, 1), date(2023, 9, 1))),     # "Next month I'm having an LGBTQ art show"
    ((0, 1, "D1:9"), (date(2023, 5, 8), date(2023, 6, 7))),      # "Gonna continue my edu": no time, 30 days
])
def test_locomo_plans_get_their_window_from_the_message_time(where, expected):
    when, who, text = turn(*where)
    items = extract_foresight([Passage(where[2], text, who, when)])
    assert items and window(items[0]) == expected, (text, items)
    assert items[0].source_id == where[2] and items[0].speaker == who and items[0].mode == "deterministic"


def test_past_events_questions_and_opinions_are_not_foresight():
    when, turns = locomo_turns(0, 1)
    said = {t["dia_id"]: t["text"] for t in turns}
    assert foresight_of(said["D1:3"], when) is None  # "I went to a LGBTQ support group yesterday…"
    for text in ("Are you going to the party next week?", "I love painting.", "我昨天去了公园。", "你下周去上海吗？"):
        assert foresight_of(text, when) is None, text


@pytest.mark.parametrize("text", [
    "Every morning I'll take Mochi to the park.",  # a habit told with "will": no window, it already holds
    "Mochi每天早上都要去公园散步。",  # the trial: a daily walk was stored as a plan
    "我周末经常去游泳。",
])
def test_a_habit_is_no_foresight_in_either_language(text):
    assert foresight_of(text, datetime(2023, 5, 8, 10, tzinfo=timezone.utc)) is None


@pytest.mark.parametrize("text, expected", [
    ("I'm going to start running every morning next week.", (date(2023, 5, 15), date(2023, 5, 22))),
    ("我打算明年每天早上跑步。", (date(2024, 1, 1), date(2025, 1, 1))),
])
def test_a_habit_that_starts_at_a_future_date_is_foresight(text, expected):
    assert window(foresight_of(text, datetime(2023, 5, 8, 10, tzinfo=timezone.utc))) == expected


@pytest.mark.parametrize("text, expected, words", [
    ("我下周去上海出差", (date(2023, 5, 15), date(2023, 5, 22)), "2023-05-15"),
    ("我打算明年考研究生", (date(2024, 1, 1), date(2025, 1, 1)), "2024"),
    ("报告月底之前要交", (date(2023, 5, 8), date(2023, 6, 1)), None),
    ("I'm adopting a puppy next month!", (date(2023, 6, 1), date(2023, 7, 1)), "June 2023"),
    ("The deadline for my thesis is Friday.", (date(2023, 5, 8), date(2023, 5, 13)), "12 May 2023"),
    ("I'm thinking of going camping in two weeks.", (date(2023, 5, 22), date(2023, 5, 29)), "22 May 2023"),
])
def test_windows_in_english_and_chinese(text, expected, words):
    item = foresight_of(text, datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc))  # a Monday
    assert item is not None and window(item) == expected
    assert words is None or words in item.text  # the absolute date is written into the text, searchable


@pytest.fixture
def alice(world):
    return api_client(world.alice_key)


def ingest_locomo(alice, committed, session, dia_ids, *, start=None, prefix=None):
    when, turns = locomo_turns(0, session)
    start = start or when
    chat = [(t["speaker"], t["text"]) for t in turns if t["dia_id"] in dia_ids]
    return ingest(alice, committed, session=f"s{session}{prefix or ''}", chat=chat, prefix=f"{prefix or session}-",
                  start=start)


def foresight_search(client, query, code=200, **filters):
    response = client.post("/api/v1/memories/search", {"query": query, "memory_types": ["foresight"],
                                                        "filters": {"user_id": "u1", **filters}}, format="json")
    assert response.status_code == code, response.content
    return response.json()


@pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")
def test_flushed_chats_become_searchable_foresight_filtered_by_valid_at(world, alice, committed):
    ingest_locomo(alice, committed, 5, {"D5:12", "D5:13"})   # the conference, July 2023
    ingest_locomo(alice, committed, 14, {"D14:32", "D14:33"})  # the art show, September 2023
    stored = Memory.objects.filter(kind="foresight")
    assert stored.count() >= 2 and all(m.parent_id and m.source_message_ids for m in stored)
    found = foresight_search(alice, "art show paintings")
    first = found["facts"][0]
    assert first["memory_type"] == "foresight" and "art show" in first["atomic_fact"]
    assert first["atomic_fact"].startswith("Caroline") and first["extraction_mode"] == "deterministic"
    assert (first["valid_from"][:10], first["valid_until"][:10]) == ("2023-09-01", "2023-10-01")
    assert first["expired"] is True and first["scores"]["expired_weight"] == 0.5
    assert found["episodes"] == []  # only what was asked for
    in_july = foresight_search(alice, "conference art show", valid_at="2023-07-20")["facts"]
    assert in_july and all("conference" in f["atomic_fact"] for f in in_july)
    in_september = foresight_search(alice, "conference art show", valid_at="2023-09-15T12:00:00Z")["facts"]
    assert any("art show" in f["atomic_fact"] for f in in_september)
    assert not any("conference" in f["atomic_fact"] for f in in_september)
    assert foresight_search(alice, "conference art show", valid_at="2030-01-01")["facts"] == []
    assert "valid_at" in foresight_search(alice, "art", code=400, valid_at="next tuesday")["error"]
    # The default search is unchanged: episodes and facts, no foresight among them.
    plain = alice.post("/api/v1/memories/search", {"query": "art show", "filters": {"user_id": "u1"}}, format="json")
    assert all("memory_type" not in f for f in plain.json()["facts"])


@pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")
def test_an_expired_plan_ranks_below_the_same_plan_still_ahead(world, alice, committed):
    chat = [("Melanie", "I'm going to a pottery workshop next month with the kids!")]
    ingest(alice, committed, session="old", chat=chat, prefix="old-", start=datetime(2023, 5, 8, tzinfo=timezone.utc))
    soon = datetime.now(timezone.utc) - timedelta(hours=1)
    ingest(alice, committed, session="new", chat=chat, prefix="new-", start=soon)
    facts = foresight_search(alice, "pottery workshop")["facts"]
    assert [f["session_id"] for f in facts] == ["new", "old"]
    assert [f["expired"] for f in facts] == [False, True] and facts[1]["score"] < facts[0]["score"]


@pytest.mark.usefixtures("lite_vector_settings")
def test_deleting_the_episode_removes_its_foresight_everywhere(world, alice, committed):
    ingest_locomo(alice, committed, 14, {"D14:33"})
    future = list(Memory.objects.filter(kind="foresight"))
    assert future and index_ids(future, world.acme.pk) == ({f"memory:{m.pk}" for m in future},) * 2
    episode = future[0].parent
    assert committed(alice.delete, f"/api/v1/memories/{episode.pk}").status_code == 200
    assert not Memory.objects.filter(kind="foresight").exists()
    assert index_ids(future, world.acme.pk) == (set(), set())


def _messages(texts, when):
    return [Message(message_id=f"m{i}", sender_name=who, content=text, timestamp=when)
            for i, (who, text) in enumerate(texts)]


def test_with_an_llm_the_model_writes_the_foresight(fake_openai):
    when = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    fake_openai.queue_json({"foresight": [{"text": "Caroline plans to adopt a puppy in June 2023.", "source": 1,
                                           "valid_from": "2023-06-01", "valid_until": "2023-06-30"}]})
    messages = _messages([("Caroline", "I'm adopting a puppy next month!")], when)
    (item,) = plan_foresight(messages, ["Caroline"])
    assert (item.text, item.mode, item.source_id) == ("Caroline plans to adopt a puppy in June 2023.", "llm", "m0")
    assert window(item) == (date(2023, 6, 1), date(2023, 7, 1))
    assert "[1]" in fake_openai.bodies("chat")[0]["messages"][1]["content"]


def test_a_failing_model_leaves_the_rules_items_and_a_chat_without_plans_costs_no_call(fake_openai):
    when = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    fake_openai.queue_error("chat", 503, times=3)
    (item,) = plan_foresight(_messages([("Caroline", "我下周去上海出差")], when), ["Caroline"])
    assert item.mode == "deterministic" and window(item) == (date(2023, 5, 15), date(2023, 5, 22))
    calls = len(fake_openai.bodies("chat"))
    assert plan_foresight(_messages([("Melanie", "I painted a lake sunrise last year.")], when), ["Melanie"]) == []
    assert len(fake_openai.bodies("chat")) == calls
