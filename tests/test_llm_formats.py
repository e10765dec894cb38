"""What the real model forced (tests/test_real_llm.py, bench/RESULTS.md "A real model"): each step's reply
shape goes to the server as a JSON Schema where it takes one, stepping down to what it accepts, and a
reply cut off at max_tokens is asked again with room and a note, not echoed back. Against
tests/fake_openai.py's local server with the real openai client; the schemas are checked with jsonschema."""

import json

import jsonschema
import pytest

from common.llm import complete_json
from conversations.agent_cases_llm import case_schema, check_case_reply
from conversations.boundaries import check_reply as check_boundaries
from conversations.boundaries import reply_schema as boundaries_schema
from conversations.profiles_llm import check_profile_reply, profile_schema
from extraction.foresight import check_foresight_reply, foresight_schema
from extraction.llm import REPLY_SCHEMA, LlmExtractor, check_reply
from retrieval.search.agentic import VERDICT_SCHEMA, check_verdict
from tests.fake_openai import Reply, fake_openai  # noqa: F401  (fixture)
from tests.test_extraction_llm import VALID, _chat_unit

ASK = [{"role": "system", "content": "Reply in JSON."}, {"role": "user", "content": "Give me facts."}]
SCHEMA = {"type": "object", "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
          "required": ["facts"]}


def test_a_schema_goes_as_json_schema_then_as_the_server_takes_it_and_is_remembered(fake_openai):
    # llama-cpp-python's server: a 500 (not a 4xx) naming the field it cannot validate
    fake_openai.queue_error("chat", 500, "1 validation error: {'loc': ('body', 'response_format', 'type'), "
                                         "'msg': \"Input should be 'text' or 'json_object'\"}")
    fake_openai.queue_json({"facts": ["a"]})
    fake_openai.queue_json({"facts": ["b"]})
    fake_openai.queue_json({"plain": "json mode"})

    assert complete_json(ASK, schema=SCHEMA, step="extraction") == {"facts": ["a"]}
    assert complete_json(ASK, schema=SCHEMA) == {"facts": ["b"]}
    assert complete_json(ASK) == {"plain": "json mode"}

    refused, stepped, remembered, no_schema = [b["response_format"] for b in fake_openai.bodies("chat")]
    assert refused == {"type": "json_schema", "json_schema": {"name": "extraction", "schema": SCHEMA, "strict": False}}
    assert stepped == remembered == {"type": "json_object", "schema": SCHEMA}  # the next call starts there
    assert no_schema == {"type": "json_object"}


def test_a_server_without_json_mode_gets_the_prompt_alone_even_with_a_schema(fake_openai):
    for _ in range(3):
        fake_openai.queue_error("chat", 400, "response_format is not supported")
    fake_openai.queue_json({"facts": []})
    fake_openai.queue_json({"facts": ["again"]})

    assert complete_json(ASK, schema=SCHEMA, max_attempts=1) == {"facts": []}
    assert complete_json(ASK, schema=SCHEMA, max_attempts=1) == {"facts": ["again"]}
    sent = [b.get("response_format", {}).get("type") for b in fake_openai.bodies("chat")]
    assert sent == ["json_schema", "json_object", "json_object", None, None]


def cut_off(content: str) -> Reply:
    return Reply(body={"id": "x", "object": "chat.completion", "created": 0, "model": "fake-llm",
                       "choices": [{"index": 0, "finish_reason": "length",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 50, "completion_tokens": 64, "total_tokens": 114}})


def test_a_reply_cut_off_at_max_tokens_is_asked_again_with_room_and_a_note(fake_openai, settings):
    settings.LLM_CONTEXT_TOKENS = 4096
    fake_openai.queue("chat", cut_off('{"facts": ["Ana lives in Lisbon.", "Ana lives in Lisbon.", "Ana li'))
    fake_openai.queue_json({"facts": ["Ana lives in Lisbon."]})

    assert complete_json(ASK, max_tokens=64, max_attempts=2) == {"facts": ["Ana lives in Lisbon."]}

    first, second = fake_openai.bodies("chat")
    assert (first["max_tokens"], second["max_tokens"]) == (64, 128)
    assert second["messages"][:2] == ASK and len(second["messages"]) == 3  # the cut-off text is not echoed
    assert "cut off at the length limit" in second["messages"][-1]["content"]


def test_the_extractor_sends_its_schema_and_the_schemas_accept_what_the_checks_accept(fake_openai):
    fake_openai.queue_json(VALID)
    assert LlmExtractor().extract(_chat_unit()).mode == "llm"
    (body,) = fake_openai.bodies("chat")
    assert body["response_format"]["json_schema"]["schema"] == REPLY_SCHEMA

    jsonschema.validate(VALID, REPLY_SCHEMA)
    check_reply(VALID)
    boundaries = {"boundaries": [3], "should_wait": False}
    jsonschema.validate(boundaries, boundaries_schema(4))
    check_boundaries(boundaries, 4)
    foresight = {"foresight": [{"text": "Ana starts a course in April 2024.", "source": 2,
                                "valid_from": "2024-04-01", "valid_until": "2024-04-30"}]}
    jsonschema.validate(foresight, foresight_schema(3))
    check_foresight_reply(foresight)
    profile = {"items": [{"subject": "Ana", "category": "location", "value": "Porto", "kind": "explicit",
                          "facts": [1]}]}
    jsonschema.validate(profile, profile_schema(2, ["Ana", "Ben"]))
    check_profile_reply(profile)
    with pytest.raises(jsonschema.ValidationError):  # a subject the facts never named
        jsonschema.validate({"items": [{**profile["items"][0], "subject": "Maria"}]}, profile_schema(2, ["Ana"]))


@pytest.mark.parametrize("reply", [
    {"topic": "t", "facts": []},  # no summary
    {"topic": "t", "summary": "s", "facts": [{"text": "x", "sources": [1], "said": "extra"}]},
    {"topic": "t", "summary": "s", "facts": [{"text": f"x{i}", "sources": [1]} for i in range(61)]},  # runaway
    {"topic": "t", "summary": "s", "facts": [{"text": "x", "sources": [1], "entities": [{"name": "A", "type": "?"}]}]},
])
def test_the_extraction_schema_refuses_what_a_runaway_model_writes(reply):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply, REPLY_SCHEMA)


CASE = {"task": "Fix the date tests.", "outcome": "They pass.",
        "steps": [{"text": "Run the tests", "tool": "run_tests", "messages": [2, 3], "error": ""}],
        "evidence": [{"kind": "tool_error", "message": 3, "text": "FAILED"}]}
VERDICT = {"is_sufficient": False, "reasoning": "no date", "missing_information": ["when"], "queries": ["the date"]}


def test_the_agent_case_and_verdict_schemas_accept_what_their_checks_accept():
    jsonschema.validate(CASE, case_schema(4, ["run_tests"]))
    check_case_reply(CASE)
    jsonschema.validate(VERDICT, VERDICT_SCHEMA)
    check_verdict(VERDICT)
    enough = {"is_sufficient": True, "reasoning": "", "missing_information": [], "queries": []}
    jsonschema.validate(enough, VERDICT_SCHEMA)
    check_verdict(enough)
    assert "maxLength" not in json.dumps([case_schema(4, ["run_tests"]), VERDICT_SCHEMA])  # llama.cpp dies on it


@pytest.mark.parametrize("reply", [
    {**CASE, "evidence": [{"kind": "tool_error", "message": "3", "text": "FAILED"}]},
    {**CASE, "steps": [{**CASE["steps"][0], "messages": [True]}]},
    {**CASE, "steps": [{**CASE["steps"][0], "tool": 7}]},
    {**CASE, "steps": []},
    {**CASE, "task": ""},
    {k: v for k, v in CASE.items() if k != "outcome"},
])
def test_the_case_schema_and_check_both_refuse_a_malformed_case(reply):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply, case_schema(4, ["run_tests"]))
    with pytest.raises(ValueError):
        check_case_reply(reply)


@pytest.mark.parametrize("reply", [
    {**VERDICT, "is_sufficient": "no"},
    {**VERDICT, "reasoning": ["no date"]},
    {**VERDICT, "missing_information": "when"},
    {**VERDICT, "queries": ["the date", 2]},
])
def test_the_verdict_schema_and_check_both_refuse_a_malformed_verdict(reply):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply, VERDICT_SCHEMA)
    with pytest.raises(ValueError):
        check_verdict(reply)


def test_a_raw_newline_inside_a_string_is_read_as_a_space(fake_openai):
    # SmolLM2 under llama-cpp-python's schema grammar, whose strings admit control characters: twice in
    # a row for the same verdict, so a retry did not help (tests/test_real_llm.py's server).
    fake_openai.queue_chat('{"is_sufficient": true, "reasoning": "...},\n{", "missing_information": [],\n'
                           '"queries": ["a\tb"]}')
    verdict = complete_json(ASK, schema_check=check_verdict, schema=VERDICT_SCHEMA, max_attempts=1)
    assert verdict == {"is_sufficient": True, "reasoning": "...}, {", "missing_information": [], "queries": ["a b"]}
    assert len(fake_openai.bodies("chat")) == 1
