"""Agent cases and skills through the REST API on real indexes (SQLite FTS5, Milvus Lite): a transcript
with tool calls becomes a case with its task, steps, outcome and quality evidence, cited to its
messages; similar successful cases become a skill; feedback moves quality and maturity, with history."""

import json
from datetime import datetime, timedelta, timezone

import jsonschema
import pytest

from conversations.agent_cases_llm import case_schema
from memory.models import CaseCluster, Memory, MemoryHistory
from tests.conftest import api_client
from tests.fake_openai import Reply, chat_reply, fake_openai  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")

T0 = datetime(2024, 6, 3, 10, 0, tzinfo=timezone.utc)

CODING = [
    ("user", "", "The CI build fails on the date parser tests, can you fix it?"),
    ("assistant", "", json.dumps({"tool_calls": [{"function": {"name": "run_tests",
                                                               "arguments": "{\"path\": \"tests/test_dates.py\"}"}}]})),
    ("tool", "run_tests", "FAILED tests/test_dates.py::test_iso_week - AssertionError: week 53 expected"),
    ("assistant", "", "The parser counts ISO weeks from Sunday; I will switch it to Monday-based weeks."),
    ("assistant", "", json.dumps({"name": "edit_file", "arguments": {"path": "dates.py"}})),
    ("tool", "edit_file", "ok: 3 lines changed"),
    ("assistant", "", json.dumps({"name": "run_tests", "arguments": {"path": "tests/test_dates.py"}})),
    ("tool", "run_tests", "12 passed in 0.4s"),
    ("assistant", "", "Fixed: the ISO week parser now starts weeks on Monday and all date tests pass."),
    ("user", "", "Thanks, that works!"),
]


def booking(city: str, hotel: str, ok: bool = True):
    reply = (f"Booked {hotel} in {city}; the confirmation number is in your inbox." if ok else
             f"I could not book a hotel in {city}: every hotel near the venue is sold out.")
    result = f"2 rooms available at {hotel}" if ok else "error: no availability for these dates"
    return [
        ("user", "", f"Please book a hotel room in {city} for the conference next week."),
        ("assistant", "", json.dumps({"name": "search_hotels", "arguments": {"city": city}})),
        ("tool", "search_hotels", result),
        *([("assistant", "", json.dumps({"name": "reserve_room", "arguments": {"hotel": hotel}})),
           ("tool", "reserve_room", "reservation confirmed")] if ok else []),
        ("assistant", "", reply),
    ]


ZH_LOOKUP = [
    ("user", "", "帮我查一下上个季度华东区的销售额。"),
    ("assistant", "", json.dumps({"name": "sql_query", "arguments": "SELECT sum(amount) FROM sales WHERE region='华东'"})),
    ("tool", "sql_query", "错误: 表 sales 不存在"),
    ("assistant", "", json.dumps({"name": "sql_query", "arguments": "SELECT sum(amount) FROM orders WHERE region='华东'"})),
    ("tool", "sql_query", "sum = 1284000"),
    ("assistant", "", "已完成：上个季度华东区的销售额是 128.4 万元。"),
]


def turns(prefix, lines, start=T0):
    return [{"message_id": f"{prefix}-{i}", "role": role, "sender_name": name, "content": text,
             "timestamp": (start + timedelta(minutes=i)).isoformat()} for i, (role, name, text) in enumerate(lines)]


@pytest.fixture
def alice(world):
    return api_client(world.alice_key)


def transcript(client, committed, session, lines, *, agent="dev-bot", user="u1", start=T0):
    # wait: where a model is configured the extraction would be queued; these tests read its memories at once.
    body = {"user_id": user, "session_id": session, "agent_id": agent, "messages": turns(session, lines, start),
            "wait": True}
    assert committed(client.post, "/api/v1/memories", body, format="json").status_code == 200
    flushed = committed(client.post, "/api/v1/memories/flush", {"user_id": user, "session_id": session, "wait": True},
                        format="json")
    assert flushed.status_code == 200, flushed.content


def agent_search(client, query, agent, **extra):
    response = client.post("/api/v1/memories/search", {"query": query, "filters": {"user_id": "u1", "agent_id": agent},
                                                        **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_coding_transcript_becomes_a_case_with_steps_outcome_and_evidence(alice, committed):
    transcript(alice, committed, "ci", CODING)
    case = Memory.objects.get(kind="agent_case")
    meta = case.metadata
    assert meta["task"] == "The CI build fails on the date parser tests, can you fix it?"
    assert [s["tool"] for s in meta["steps"] if s["tool"]] == ["run_tests", "edit_file", "run_tests"]
    assert meta["steps"][0]["error"] and "week 53" in meta["steps"][0]["text"]
    assert meta["outcome"].startswith("Fixed: the ISO week parser")
    kinds = [e["kind"] for e in meta["evidence"]]
    assert {"tool_error", "recovered", "agent_reported_success", "user_positive"} <= set(kinds)
    assert meta["outcome_label"] == "success" and meta["quality"] >= 0.8
    assert case.source_message_ids[0] == "ci-0" and "ci-9" in case.source_message_ids
    assert case.agent_id == "dev-bot" and case.parent.kind == "episode"
    assert MemoryHistory.objects.filter(memory_id=case.pk, event="ADD").exists()

    found = agent_search(alice, "fix the date parser tests in CI", "dev-bot", memory_types=["agent_case"])
    top = found["agent_memory"][0]
    assert top["id"] == str(case.pk) and top["memory_type"] == "agent_case" and top["rank"] >= 1
    assert top["outcome_label"] == "success" and top["tools"] == ["run_tests", "edit_file"]
    assert top["sources"][0]["type"] == "message" and top["sources"][0]["message_id"] == "ci-0"
    # A user-level search names no agent: the agent's case is not in it unless the types ask for cases.
    plain = alice.post("/api/v1/memories/search", {"query": "fix the date parser tests",
                                                   "filters": {"user_id": "u1"}}, format="json").json()
    assert plain["agent_memory"] == []


def test_asking_for_agent_memory_without_an_agent_searches_every_agent_and_says_so(alice, committed):
    transcript(alice, committed, "ci", CODING, agent="dev-bot")
    transcript(alice, committed, "trip", booking("Kyoto", "Hotel Kanra"), agent="travel-bot")
    response = alice.post("/api/v1/memories/search", {"query": "fix the date parser tests", "memory_types": [
        "agent_case"], "filters": {"user_id": "u1"}}, format="json")
    assert response.status_code == 200, response.content
    found = response.json()
    assert found["agent_memory"][0]["agent_id"] == "dev-bot"
    assert {item["memory_type"] for item in found["agent_memory"]} == {"agent_case"}
    assert any("agent_id" in note and "every agent" in note for note in found["query"]["notes"])
    named = agent_search(alice, "fix the date parser tests", "travel-bot", memory_types=["agent_case"])
    assert {item["agent_id"] for item in named["agent_memory"]} <= {"travel-bot"}  # a named agent: only its own
    assert not any("every agent" in note for note in named["query"]["notes"])


def test_a_chinese_lookup_with_a_failed_query_then_a_good_one(alice, committed):
    transcript(alice, committed, "zh", ZH_LOOKUP, agent="data-bot")
    meta = Memory.objects.get(kind="agent_case").metadata
    assert meta["task"] == "帮我查一下上个季度华东区的销售额。"
    assert [e["kind"] for e in meta["evidence"]][:2] == ["tool_error", "recovered"]
    assert meta["outcome_label"] == "success" and "128.4" in meta["outcome"]
    found = agent_search(alice, "华东区 销售额", "data-bot", memory_types=["agent_case"])
    assert found["agent_memory"] and found["agent_memory"][0]["task"].startswith("帮我查一下")


def test_a_plain_chat_is_no_case(alice, committed):
    transcript(alice, committed, "chat", [("user", "", "I love hiking in the Alps."),
                                          ("assistant", "", "The Alps are lovely in June.")])
    assert not Memory.objects.filter(kind="agent_case").exists()


def test_similar_cases_become_a_skill_whose_maturity_follows_feedback(alice, committed):
    for n, (city, hotel, ok) in enumerate([("Lisbon", "Hotel Avenida", True), ("Porto", "Hotel Ribeira", True),
                                           ("Madrid", "Hotel Prado", False), ("Seville", "Hotel Giralda", True)]):
        transcript(alice, committed, f"book{n}", booking(city, hotel, ok), agent="travel-bot",
                   start=T0 + timedelta(days=n))
    cases = Memory.objects.filter(kind="agent_case").order_by("session_id")
    assert [c.metadata["outcome_label"] for c in cases] == ["success", "success", "failure", "success"]
    assert CaseCluster.objects.filter(agent_id="travel-bot").count() == 1
    skill = Memory.objects.get(kind="agent_skill")
    meta = skill.metadata
    assert meta["successes"] == 3 and meta["failures"] == 1 and meta["maturity"] == pytest.approx(4 / 6, abs=1e-3)
    assert [s.split("(")[0] for s in meta["steps"]] == ["search_hotels", "reserve_room"]
    assert any("no availability" in p for p in meta["pitfalls"])
    assert skill.agent_id == "travel-bot" and set(skill.source_message_ids) >= {"book0-0", "book3-0"}

    found = agent_search(alice, "book a hotel room for a conference", "travel-bot")
    kinds = [item["memory_type"] for item in found["agent_memory"]]
    assert "agent_skill" in kinds and "agent_case" in kinds

    def feedback(memory_id, outcome):
        response = committed(alice.post, f"/api/v1/memories/{memory_id}/feedback", {"outcome": outcome,
                                                                                    "note": "scripted"}, format="json")
        assert response.status_code == 200, response.content
        return response.json()

    assert feedback(skill.pk, "success")["maturity"] == pytest.approx(5 / 7, abs=1e-3)
    assert feedback(skill.pk, "success")["maturity"] == pytest.approx(6 / 8, abs=1e-3)
    assert feedback(skill.pk, "failure")["maturity"] == pytest.approx(6 / 9, abs=1e-3)
    case = feedback(cases[0].pk, "failure")  # a case's feedback lowers its quality and its skill's maturity
    assert case["quality"] < cases[0].metadata["quality"] and case["skill_id"] == str(skill.pk)
    history = alice.get(f"/api/v1/memories/{skill.pk}/history").json()
    events = history["history"]
    assert len(events) >= 4 and any("feedback: success" in (e.get("reason") or "") for e in events)

    bad = alice.post(f"/api/v1/memories/{skill.pk}/feedback", {"outcome": "meh"}, format="json")
    assert bad.status_code == 400
    episode = Memory.objects.filter(kind="episode").first()
    refused = alice.post(f"/api/v1/memories/{episode.pk}/feedback", {"outcome": "success"}, format="json")
    assert refused.status_code == 400 and "agent cases and agent skills" in refused.content.decode()


def test_the_skill_text_says_what_feedback_reported(alice, committed):
    """A reader of the skill's text (as search returns it) sees the failures reported on it, not only the
    cases' own outcomes: "2 of 2 cases succeeded" and "Pitfalls: none seen" after a failure misled."""
    for n, (city, hotel) in enumerate([("Lisbon", "Hotel Avenida"), ("Porto", "Hotel Ribeira")]):
        transcript(alice, committed, f"book{n}", booking(city, hotel), agent="travel-bot", start=T0 + timedelta(days=n))
    skill = Memory.objects.get(kind="agent_skill")
    assert "2 of 2 cases succeeded" in skill.text and "Pitfalls: none seen" in skill.text
    response = committed(alice.post, f"/api/v1/memories/{skill.pk}/feedback",
                         {"outcome": "failure", "note": "the hotel cancelled the booking"}, format="json")
    assert response.status_code == 200, response.content
    skill.refresh_from_db()
    assert "Pitfalls: none seen" not in skill.text and "the hotel cancelled the booking" in skill.text
    assert "1 failure reported" in skill.text, skill.text
    found = agent_search(alice, "book a hotel room", "travel-bot")
    text = next(i for i in found["agent_memory"] if i["memory_type"] == "agent_skill")
    assert "the hotel cancelled the booking" in json.dumps(text, ensure_ascii=False)


def test_deleting_a_user_takes_their_cases_skills_and_clusters(alice, committed):
    for n, (city, hotel) in enumerate([("Lisbon", "Hotel Avenida"), ("Porto", "Hotel Ribeira")]):
        transcript(alice, committed, f"book{n}", booking(city, hotel), agent="travel-bot", start=T0 + timedelta(days=n))
    assert Memory.objects.filter(kind="agent_skill").count() == 1 and CaseCluster.objects.count() == 1
    assert committed(alice.delete, "/api/v1/memories?user_id=u1").status_code == 200
    assert not Memory.objects.filter(kind__in=["agent_case", "agent_skill"]).exists()
    assert not CaseCluster.objects.exists()
    found = agent_search(alice, "book a hotel room", "travel-bot")
    assert found["agent_memory"] == []


GERMAN = [  # the rules' phrase lists are English and Chinese: they read no outcome here
    ("user", "", "Kannst du die fehlschlagenden Datumstests reparieren?"),
    ("assistant", "", json.dumps({"name": "run_tests", "arguments": {"path": "tests/test_dates.py"}})),
    ("tool", "run_tests", "FAILED tests/test_dates.py::test_iso_week - AssertionError"),
    ("assistant", "", json.dumps({"name": "edit_file", "arguments": {"path": "dates.py"}})),
    ("tool", "edit_file", "ok: 3 lines changed"),
    ("assistant", "", "Erledigt: die Wochen beginnen jetzt am Montag, alle Datumstests laufen durch."),
    ("user", "", "Super, danke!"),
]
CASE_PROMPT_WORDS = "You record what an AI agent did about a task"


def test_with_an_llm_the_model_writes_the_case_and_the_api_says_so(alice, committed, fake_openai):  # noqa: F811
    fake_openai.queue_json_for(CASE_PROMPT_WORDS, {
        "task": "Repair the failing date tests.",
        "steps": [{"text": "Run the date tests", "tool": "run_tests", "messages": [2, 3], "error": "test_iso_week fails"},
                  {"text": "Make weeks start on Monday", "tool": "edit_file", "messages": [4, 5], "error": ""},
                  {"text": "Deploy to production", "tool": "deploy", "messages": [99], "error": ""}],
        "outcome": "Weeks start on Monday and all date tests pass.",
        "evidence": [{"kind": "tool_error", "message": 3, "text": "test_iso_week fails"},
                     {"kind": "agent_reported_success", "message": 6, "text": "Erledigt"},
                     {"kind": "user_positive", "message": 7, "text": "Super, danke!"},
                     {"kind": "user_positive", "message": 42, "text": "cited no message of this MemCell"},
                     {"kind": "made_up", "message": 6, "text": "not a kind the rules know"}]})
    transcript(alice, committed, "de", GERMAN)
    case = Memory.objects.get(kind="agent_case")
    meta = case.metadata
    assert case.extraction_mode == "llm"
    assert meta["task"] == "Repair the failing date tests." and meta["outcome"].startswith("Weeks start on Monday")
    assert [(s["tool"], s["message_ids"]) for s in meta["steps"]] == [
        ("run_tests", ["de-1", "de-2"]), ("edit_file", ["de-3", "de-4"]), ("", [])]  # no tool the agent never called
    assert [e["kind"] for e in meta["evidence"]] == ["tool_error", "agent_reported_success", "user_positive"]
    assert meta["quality"] == pytest.approx(0.5 - 0.1 + 0.3 + 0.2) and meta["outcome_label"] == "success"
    assert meta["tools"] == ["run_tests", "edit_file"]  # the rules' (clustering compares them)
    (prompt,) = [b for b in fake_openai.bodies("chat") if CASE_PROMPT_WORDS in b["messages"][0]["content"]]
    assert "[3] (tool: run_tests) FAILED" in prompt["messages"][1]["content"]

    found = agent_search(alice, "repair the date tests", "dev-bot", memory_types=["agent_case"])
    top = found["agent_memory"][0]
    assert top["id"] == str(case.pk) and top["extraction_mode"] == "llm" and top["outcome_label"] == "success"
    assert alice.get(f"/api/v1/memories/{case.pk}").json()["extraction_mode"] == "llm"


def test_without_an_answer_from_the_model_the_rules_case_stands(alice, committed, fake_openai):  # noqa: F811
    transcript(alice, committed, "ci", CODING)  # every model call of the flush gets an HTTP 500
    case = Memory.objects.get(kind="agent_case")
    assert case.extraction_mode == "deterministic" and case.metadata["outcome_label"] == "success"
    assert any(CASE_PROMPT_WORDS in b["messages"][0]["content"] for b in fake_openai.bodies("chat"))
    found = agent_search(alice, "fix the date parser tests in CI", "dev-bot", memory_types=["agent_case"])
    assert found["agent_memory"][0]["extraction_mode"] == "deterministic"


def test_a_chat_without_tools_asks_the_model_for_no_case(alice, committed, fake_openai):  # noqa: F811
    transcript(alice, committed, "chat", [("user", "", "I love hiking in the Alps."),
                                          ("assistant", "", "The Alps are lovely in June.")])
    assert not Memory.objects.filter(kind="agent_case").exists()
    assert not any(CASE_PROMPT_WORDS in b["messages"][0]["content"] for b in fake_openai.bodies("chat"))


def test_without_an_llm_cases_are_the_rules_and_say_so(alice, committed):
    transcript(alice, committed, "de", GERMAN)
    case = Memory.objects.get(kind="agent_case")
    assert case.extraction_mode == "deterministic" and case.metadata["outcome_label"] == "mixed"
    found = agent_search(alice, "Datumstests reparieren", "dev-bot", memory_types=["agent_case"])
    assert found["agent_memory"][0]["extraction_mode"] == "deterministic"


GERMAN_TOOLS = ["run_tests", "edit_file"]


def case_requests(fake_openai) -> list[dict]:
    return [b for b in fake_openai.bodies("chat") if CASE_PROMPT_WORDS in b["messages"][0]["content"]]


def test_the_case_step_sends_its_schema_and_uses_a_reply_that_follows_it(alice, committed, fake_openai):  # noqa: F811
    reply = {"task": "Repair the failing date tests.",
             "steps": [{"text": "Run the date tests", "tool": "run_tests", "messages": [2, 3], "error": "week 53"},
                       {"text": "Start weeks on Monday", "tool": "edit_file", "messages": [4, 5], "error": ""}],
             "outcome": "All date tests pass.",
             "evidence": [{"kind": "agent_reported_success", "message": 6, "text": "Erledigt"},
                          {"kind": "user_positive", "message": 7, "text": "Super, danke!"}]}
    schema = case_schema(len(GERMAN), GERMAN_TOOLS)
    jsonschema.validate(reply, schema)
    fake_openai.queue_json_for(CASE_PROMPT_WORDS, reply)
    transcript(alice, committed, "de", GERMAN)

    (request,) = case_requests(fake_openai)
    assert request["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "agent_case", "schema": schema, "strict": False}}
    assert schema["properties"]["steps"]["items"]["properties"]["tool"] == {"enum": ["", "run_tests", "edit_file"]}
    case = Memory.objects.get(kind="agent_case")
    assert case.extraction_mode == "llm" and case.metadata["task"] == "Repair the failing date tests."
    assert [e["kind"] for e in case.metadata["evidence"]] == ["agent_reported_success", "user_positive"]
    assert alice.get(f"/api/v1/memories/{case.pk}").json()["extraction_mode"] == "llm"


def cut_off(content: str) -> Reply:
    return chat_reply(content, finish_reason="length")


BAD_CASE_REPLIES = {
    # Every piece of evidence cites its message as a string: read item by item, the case would keep
    # none of it and its quality would fall to the neutral 0.5 while saying the model wrote it.
    "wrong_types": json.dumps({"task": "Repair the date tests.",
                               "steps": [{"text": "Run the tests", "tool": "run_tests", "messages": ["2"], "error": ""}],
                               "outcome": "Fixed.", "evidence": [{"kind": "user_positive", "message": "7", "text": "x"}]}),
    "no_evidence": json.dumps({"task": "Repair the date tests.", "outcome": "Fixed.",
                               "steps": [{"text": "Run the tests", "tool": "run_tests", "messages": [2], "error": ""}]}),
    "empty_task": json.dumps({"task": " ", "steps": [{"text": "Run the tests", "tool": "", "messages": [], "error": ""}],
                              "outcome": "", "evidence": []}),
    "truncated": '{"task": "Repair the date tests.", "steps": [{"text": "Run the tests", "tool": "run_te',
}


@pytest.mark.parametrize("bad", BAD_CASE_REPLIES)
def test_a_malformed_case_reply_leaves_the_rules_case_and_the_api_says_so(alice, committed, fake_openai, bad):  # noqa: F811
    content = BAD_CASE_REPLIES[bad]
    attempts = 3  # LLM_MAX_RETRIES 2 (tests/fake_openai.py): every attempt gets the same reply
    fake_openai.queue_for(CASE_PROMPT_WORDS, *[cut_off(content) if bad == "truncated" else chat_reply(content)
                                               for _ in range(attempts)])
    transcript(alice, committed, "de", GERMAN)

    requests = case_requests(fake_openai)
    assert len(requests) == attempts  # the model was asked again with its mistake, then the rules answered
    assert all(r["response_format"]["json_schema"]["schema"] == case_schema(len(GERMAN), GERMAN_TOOLS)
               for r in requests)
    case = Memory.objects.get(kind="agent_case")
    assert case.extraction_mode == "deterministic"
    assert case.metadata["task"] == "Kannst du die fehlschlagenden Datumstests reparieren?"
    assert case.metadata["outcome_label"] == "mixed" and case.metadata["tools"] == GERMAN_TOOLS
    assert alice.get(f"/api/v1/memories/{case.pk}").json()["extraction_mode"] == "deterministic"
    found = agent_search(alice, "Datumstests reparieren", "dev-bot", memory_types=["agent_case"])
    assert found["agent_memory"][0]["extraction_mode"] == "deterministic"
