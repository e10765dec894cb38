"""common.llm against a real local HTTP server: the real openai client, real timeouts, real retries."""

import logging
import time

import pytest

from common.llm import LlmError, complete_json, llm_client, parse_json_reply
from tests.fake_openai import fake_openai  # noqa: F401  (fixture)

ASK = [{"role": "system", "content": "Reply in JSON."}, {"role": "user", "content": "Give me a fact."}]


def test_it_returns_a_valid_json_reply(fake_openai):
    fake_openai.queue_json({"fact": "water boils at 100 °C"})

    assert complete_json(ASK) == {"fact": "water boils at 100 °C"}

    (request,) = fake_openai.requests
    assert request.body["model"] == "fake-llm"
    assert request.body["messages"] == ASK
    assert request.body["response_format"] == {"type": "json_object"}
    assert request.headers["authorization"] == "Bearer test-key"


def test_it_parses_json_wrapped_in_a_fence(fake_openai):
    fake_openai.queue_chat('Sure! Here it is:\n```json\n{"fact": "fenced", "n": [1, 2]}\n```\nAnything else?')

    assert complete_json(ASK) == {"fact": "fenced", "n": [1, 2]}


def test_it_retries_a_malformed_reply_and_shows_the_model_its_mistake(fake_openai):
    fake_openai.queue_chat('{"fact": "unterminated', '{"fact": "fixed"}')

    assert complete_json(ASK, max_attempts=3) == {"fact": "fixed"}

    first, second = fake_openai.bodies("chat")
    assert first["messages"] == ASK
    assert second["messages"][: len(ASK)] == ASK
    assert second["messages"][len(ASK)] == {"role": "assistant", "content": '{"fact": "unterminated'}
    assert "not usable" in second["messages"][-1]["content"]


def test_it_raises_after_the_last_malformed_attempt(fake_openai, caplog):
    fake_openai.queue_chat("no json here", "[1, 2, 3]", "still {not json")

    with caplog.at_level(logging.WARNING, logger="common.llm"), pytest.raises(LlmError, match="after 3 attempts"):
        complete_json(ASK, max_attempts=3)

    assert len(fake_openai.bodies("chat")) == 3
    assert sum("LLM attempt" in r.getMessage() for r in caplog.records) == 2


def test_max_attempts_defaults_to_llm_max_retries_plus_one(fake_openai, settings):
    settings.LLM_MAX_RETRIES = 1
    fake_openai.queue_chat("bad", "bad", '{"never": "reached"}')

    with pytest.raises(LlmError):
        complete_json(ASK)

    assert len(fake_openai.bodies("chat")) == 2


def test_it_retries_after_a_timeout(fake_openai, settings):
    settings.LLM_TIMEOUT = 0.3
    fake_openai.queue_delay("chat", 3.0)
    fake_openai.queue_json({"fact": "second try"})

    started = time.monotonic()
    assert complete_json(ASK, max_attempts=2) == {"fact": "second try"}
    assert time.monotonic() - started < 2.0  # it gave up on the slow reply rather than waiting for it


def test_it_raises_when_every_attempt_times_out(fake_openai, settings):
    settings.LLM_TIMEOUT = 0.3
    fake_openai.queue_delay("chat", 3.0, times=2)

    with pytest.raises(LlmError, match="APITimeoutError"):
        complete_json(ASK, max_attempts=2)
    assert len(fake_openai.bodies("chat")) == 2


@pytest.mark.parametrize("status", [500, 503, 429])
def test_it_retries_server_errors_and_rate_limits(fake_openai, status):
    fake_openai.queue_error("chat", status)
    fake_openai.queue_json({"fact": "recovered"})

    assert complete_json(ASK, max_attempts=2) == {"fact": "recovered"}
    assert len(fake_openai.bodies("chat")) == 2


def test_it_does_not_retry_a_refused_request(fake_openai):
    fake_openai.queue_error("chat", 401, "invalid api key")
    fake_openai.queue_json({"fact": "never sent"})

    with pytest.raises(LlmError, match="401"):
        complete_json(ASK, max_attempts=3)
    assert len(fake_openai.bodies("chat")) == 1


def test_it_retries_a_reply_the_schema_check_rejects(fake_openai):
    fake_openai.queue_json({"facts": "not a list"})
    fake_openai.queue_json({"facts": ["a", "b"]})

    def check(obj):
        if not isinstance(obj.get("facts"), list):
            raise ValueError('"facts" must be a list')

    assert complete_json(ASK, schema_check=check, max_attempts=2) == {"facts": ["a", "b"]}
    assert '"facts" must be a list' in fake_openai.bodies("chat")[1]["messages"][-1]["content"]


def test_a_schema_check_returning_false_rejects_the_reply(fake_openai):
    fake_openai.queue_chat('{"n": 1}', '{"n": 2}')

    assert complete_json(ASK, schema_check=lambda obj: obj["n"] == 2, max_attempts=2) == {"n": 2}


def test_it_falls_back_to_a_plain_prompt_when_json_mode_is_rejected(fake_openai):
    fake_openai.queue_error("chat", 400, "response_format is not supported by this model")
    fake_openai.queue_json({"fact": "plain"})
    fake_openai.queue_json({"fact": "plain again"})

    assert complete_json(ASK, max_attempts=1) == {"fact": "plain"}
    assert complete_json(ASK, max_attempts=1) == {"fact": "plain again"}

    rejected, plain, remembered = fake_openai.bodies("chat")
    assert rejected["response_format"] == {"type": "json_object"}
    assert "response_format" not in plain
    assert "response_format" not in remembered  # the server's answer is remembered


def test_it_is_off_when_no_llm_is_configured(settings):
    settings.LLM_ENABLED = False

    assert llm_client() is None
    with pytest.raises(LlmError, match="no LLM is configured"):
        complete_json(ASK)


@pytest.mark.parametrize(
    "reply, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('<think>Let me see {"draft": 1}</think>\n{"a": 2}', {"a": 2}),
        ('```\n{"a": 3}\n```', {"a": 3}),
        ('Use {braces} like this:\n```json\n{"a": 5}\n```', {"a": 5}),  # only the fence holds the object
        ('The answer is {"a": {"b": 4}} as requested.', {"a": {"b": 4}}),
    ],
)
def test_parse_json_reply_finds_the_object(reply, expected):
    assert parse_json_reply(reply) == expected


@pytest.mark.parametrize("reply", ["", None, "[1, 2]", "{'single': 'quotes'}", "plain words"])
def test_parse_json_reply_rejects_what_is_not_a_json_object(reply):
    with pytest.raises(ValueError):
        parse_json_reply(reply)
