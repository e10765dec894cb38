"""What one LLM call, one flush and one endpoint may cost: the breaker, max_tokens, the context guard,
temperature only where the model takes it, and a deadline for a flush's LLM steps.

Against tests/fake_openai.py's real local HTTP server, with the real openai client and timeouts.
"""

import json
import time

import pytest

from common.llm import LlmError, complete_json
from common.llm_scope import llm_scope
from memory.models import Memory
from tests.conftest import api_client
from tests.fake_openai import Reply, _chat_body, fake_openai  # noqa: F401  (fixture)
from tests.test_conversation_api import ingest

ASK = [{"role": "system", "content": "Reply in JSON."}, {"role": "user", "content": "Give me a fact."}]


# --- The breaker

def test_the_breaker_opens_after_n_failures_and_then_sends_nothing(fake_openai, settings):
    settings.LLM_BREAKER_FAILURES = 2
    settings.LLM_BREAKER_COOLDOWN_SECONDS = 60
    fake_openai.queue_error("chat", 503, times=5)

    with pytest.raises(LlmError):
        complete_json(ASK, max_attempts=4)
    assert len(fake_openai.bodies("chat")) == 2  # the breaker opened: no third, fourth attempt

    started = time.monotonic()
    with pytest.raises(LlmError, match="circuit open"):
        complete_json(ASK)
    assert time.monotonic() - started < 0.1
    assert len(fake_openai.bodies("chat")) == 2


def test_a_changed_breaker_setting_holds_for_an_endpoint_already_called(fake_openai, settings):
    settings.LLM_BREAKER_FAILURES = 5
    fake_openai.queue_json({"a": 1})
    complete_json(ASK)  # the endpoint's breaker now exists, made with 5

    settings.LLM_BREAKER_FAILURES = 1
    settings.LLM_BREAKER_COOLDOWN_SECONDS = 60
    fake_openai.queue_error("chat", 503, times=3)
    with pytest.raises(LlmError):
        complete_json(ASK, max_attempts=3)
    assert len(fake_openai.bodies("chat")) == 2  # opened after one failure, as the setting now says


def test_after_the_cool_down_one_trial_closes_it(fake_openai, settings):
    settings.LLM_BREAKER_FAILURES = 1
    settings.LLM_BREAKER_COOLDOWN_SECONDS = 0.3
    fake_openai.queue_error("chat", 500)
    with pytest.raises(LlmError):
        complete_json(ASK, max_attempts=1)
    with pytest.raises(LlmError, match="circuit open"):
        complete_json(ASK, max_attempts=1)

    time.sleep(0.35)
    fake_openai.queue_json({"fact": "back"})
    fake_openai.queue_json({"fact": "still back"})
    assert complete_json(ASK, max_attempts=1) == {"fact": "back"}
    assert complete_json(ASK, max_attempts=1) == {"fact": "still back"}  # closed again


def test_a_failed_trial_opens_it_again(fake_openai, settings):
    settings.LLM_BREAKER_FAILURES = 3
    settings.LLM_BREAKER_COOLDOWN_SECONDS = 0.3
    fake_openai.queue_error("chat", 500, times=4)
    with pytest.raises(LlmError):
        complete_json(ASK, max_attempts=3)
    time.sleep(0.35)
    with pytest.raises(LlmError):
        complete_json(ASK, max_attempts=3)  # the one trial fails: open again at once, no second attempt
    assert len(fake_openai.bodies("chat")) == 4


def test_with_the_breaker_open_a_flush_is_the_rules_at_once(fake_openai, settings, world, committed):
    settings.LLM_BREAKER_FAILURES = 1
    settings.LLM_BREAKER_COOLDOWN_SECONDS = 60
    fake_openai.queue_error("chat", 503)
    with pytest.raises(LlmError):
        complete_json(ASK, max_attempts=1)

    ingest(api_client(world.alice_key), committed, chat=[("Li Lei", "I live in Beijing and work at a bank.")])
    assert len(fake_openai.bodies("chat")) == 1  # nothing more was sent
    assert set(Memory.objects.values_list("extraction_mode", flat=True)) == {"deterministic"}


# --- What every call carries

def test_every_call_carries_max_tokens(fake_openai, settings):
    settings.LLM_MAX_TOKENS = 321
    fake_openai.queue_json({"a": 1})
    fake_openai.queue_json({"a": 2})

    complete_json(ASK)
    complete_json(ASK, max_tokens=50)
    assert [b["max_tokens"] for b in fake_openai.bodies("chat")] == [321, 50]


def test_a_prompt_is_cut_to_the_model_window_keeping_its_start_and_end(fake_openai, settings):
    settings.LLM_CONTEXT_TOKENS = 1000
    settings.LLM_MAX_TOKENS = 200
    material = " ".join(f"word{i}" for i in range(20_000))
    fake_openai.queue_json({"ok": True})

    complete_json([{"role": "user", "content": f"INSTRUCTIONS FIRST\n{material}\nANSWER IN JSON LAST"}])
    (sent,) = fake_openai.bodies("chat")
    content = sent["messages"][0]["content"]
    assert len(content) / 4 <= 800  # window less max_tokens, at ~4 characters a token
    assert content.startswith("INSTRUCTIONS FIRST") and content.endswith("ANSWER IN JSON LAST")
    assert "cut to fit" in content


OVERFLOW = ("This model's maximum context length is 4096 tokens. However, you requested 9000 tokens "
            "(8000 in the messages, 1000 in the completion). Please reduce the length of the messages.")


def test_a_context_overflow_is_not_taken_for_json_mode_rejected(fake_openai):
    fake_openai.queue_error("chat", 400, OVERFLOW)
    fake_openai.queue_json({"never": "sent"})

    with pytest.raises(LlmError, match="context"):
        complete_json(ASK, max_attempts=3)
    (only,) = fake_openai.bodies("chat")  # not re-sent as a plain prompt, not retried
    assert only["response_format"] == {"type": "json_object"}


# --- Temperature only where the model takes it

TEMPERATURE_REFUSED = ("Unsupported value: 'temperature' does not support 0.0 with this model. "
                       "Only the default (1) value is supported.")


def test_a_refused_temperature_is_dropped_once_and_remembered(fake_openai):
    fake_openai.queue_error("chat", 400, TEMPERATURE_REFUSED)
    fake_openai.queue_json({"a": 1})
    fake_openai.queue_json({"a": 2})

    assert complete_json(ASK, temperature=0.0) == {"a": 1}
    assert complete_json(ASK, temperature=0.0) == {"a": 2}
    refused, retried, remembered = fake_openai.bodies("chat")
    assert refused["temperature"] == 0.0
    assert "temperature" not in retried and retried["response_format"] == {"type": "json_object"}  # JSON mode kept
    assert "temperature" not in remembered


# --- Deadlines

def test_a_deadline_stops_the_calls_of_its_scope(fake_openai, settings):
    settings.LLM_TIMEOUT = 5.0
    fake_openai.queue_delay("chat", 10.0, times=3)

    started = time.monotonic()
    with llm_scope(seconds=0.5), pytest.raises(LlmError):
        complete_json(ASK, max_attempts=3)
    assert time.monotonic() - started < 1.5


def test_a_flush_against_a_hung_endpoint_ends_at_its_deadline_with_the_rules(fake_openai, settings, world, committed):
    settings.LLM_TIMEOUT = 5.0
    settings.LLM_FLUSH_DEADLINE_SECONDS = 1.0
    hung = Reply(body=_chat_body(json.dumps({})), delay=30.0)
    fake_openai._default_reply = lambda endpoint, body: (hung if endpoint == "chat" else
                                                          type(fake_openai)._default_reply(fake_openai, endpoint, body))

    started = time.monotonic()
    ingest(api_client(world.alice_key), committed, chat=[("Li Lei", "I live in Beijing and work at a bank."),
                                                         ("Han Meimei", "Beijing winters are cold!")])
    assert time.monotonic() - started < 6.0  # 1 s of LLM; the rest is the rules, embedding and indexing
    assert Memory.objects.filter(kind=Memory.Kind.ATOMIC_FACT).exists()
    assert set(Memory.objects.values_list("extraction_mode", flat=True)) == {"deterministic"}
