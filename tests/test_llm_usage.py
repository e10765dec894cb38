"""What the model costs: tokens read from each reply's `usage`, counted per tenant, step and day; a
daily budget per tenant past which the rules answer; and the Prometheus series of the calls.

Against tests/fake_openai.py's real local HTTP server; the counts are read from the database and
from a real scrape (common.metrics.exposition), not from mocks.
"""

import logging

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from common import metrics
from common.llm import LlmError, complete_json
from common.llm_scope import llm_scope
from memory.models import Memory
from tenants.models import LlmUsage
from tests.conftest import api_client
from tests.fake_openai import Reply, _chat_body, fake_openai  # noqa: F401  (fixture)
from tests.test_conversation_api import ingest

ASK = [{"role": "user", "content": "Give me a fact in JSON."}]


def reply_with_usage(content: str, prompt: int, completion: int) -> Reply:
    body = _chat_body(content)
    body["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return Reply(body=body)


def spent(tenant, step):
    row = LlmUsage.objects.filter(tenant=tenant, step=step, day=timezone.now().date()).first()
    return row and (row.calls, row.prompt_tokens, row.completion_tokens)


def test_tokens_are_counted_per_tenant_and_step(fake_openai, world):
    fake_openai.queue("chat", reply_with_usage('{"a": 1}', 120, 30), reply_with_usage('{"a": 2}', 80, 10),
                      reply_with_usage('{"a": 3}', 5, 5))

    with llm_scope(tenant_id=world.acme.pk):
        complete_json(ASK, step="extraction")
        complete_json(ASK, step="extraction")
    with llm_scope(tenant_id=world.globex.pk):
        complete_json(ASK, step="profiles")

    assert spent(world.acme, "extraction") == (2, 200, 40)
    assert spent(world.globex, "profiles") == (1, 5, 5)
    assert spent(world.acme, "profiles") is None


def test_a_spent_budget_refuses_the_call_and_says_so(fake_openai, world, settings, caplog):
    settings.LLM_TOKEN_BUDGET = 100
    fake_openai.queue("chat", reply_with_usage('{"a": 1}', 90, 20))
    fake_openai.queue_json({"never": "sent"})
    with llm_scope(tenant_id=world.acme.pk):
        complete_json(ASK, step="extraction")  # 110 of 100: the call that crossed it is counted, the next refused
        with caplog.at_level(logging.WARNING, logger="common.llm"), pytest.raises(LlmError, match="budget"):
            complete_json(ASK, step="profiles")

    assert len(fake_openai.bodies("chat")) == 1
    assert any("acme" in r.getMessage() or str(world.acme.pk) in r.getMessage() for r in caplog.records
               if "budget" in r.getMessage())
    with llm_scope(tenant_id=world.globex.pk):  # another tenant's budget is its own
        assert complete_json(ASK, step="extraction") == {"never": "sent"}


def test_with_its_budget_spent_a_tenants_flush_is_the_rules_without_a_call(fake_openai, world, settings, committed):
    settings.LLM_TOKEN_BUDGET = 1000
    LlmUsage.objects.create(tenant=world.acme, day=timezone.now().date(), step="extraction", calls=3,
                            prompt_tokens=900, completion_tokens=200)

    ingest(api_client(world.alice_key), committed, chat=[("Li Lei", "I live in Beijing and work at a bank.")])
    assert fake_openai.bodies("chat") == []
    assert set(Memory.objects.values_list("extraction_mode", flat=True)) == {"deterministic"}


def scrape() -> dict:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(metrics.exposition().decode()) for s in family.samples}


def delta(before: dict, after: dict, name: str, **labels) -> float:
    key = (name, frozenset(labels.items()))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_calls_errors_latency_tokens_and_the_breaker_are_series(fake_openai, settings, world):
    settings.LLM_BREAKER_FAILURES = 1
    settings.LLM_BREAKER_COOLDOWN_SECONDS = 60
    fake_openai.queue("chat", reply_with_usage('{"a": 1}', 120, 30))
    fake_openai.queue_error("chat", 503)
    before = scrape()
    # Steps no other caller names: the counters are the process's, and an earlier test's extraction
    # thread still finishing in this xdist worker once counted a second `extraction` call (2026-12-06).
    ok_step, failing_step = "usage-series-ok", "usage-series-failing"

    with llm_scope(tenant_id=world.acme.pk):
        complete_json(ASK, step=ok_step)
        with pytest.raises(LlmError):
            complete_json(ASK, step=failing_step, max_attempts=1)
        with pytest.raises(LlmError):
            complete_json(ASK, step=failing_step, max_attempts=1)  # the breaker is open: not sent

    after = scrape()
    assert delta(before, after, "loci_llm_calls_total", step=ok_step, outcome="ok") == 1
    assert delta(before, after, "loci_llm_calls_total", step=failing_step, outcome="error") == 1
    assert delta(before, after, "loci_llm_calls_total", step=failing_step, outcome="breaker_open") == 1
    assert delta(before, after, "loci_llm_errors_total", step=failing_step, kind="http_5xx") == 1
    assert delta(before, after, "loci_llm_tokens_total", step=ok_step, kind="prompt") == 120
    assert delta(before, after, "loci_llm_tokens_total", step=ok_step, kind="completion") == 30
    assert delta(before, after, "loci_llm_call_duration_seconds_count", step=ok_step) == 1
    assert after[("loci_llm_breaker_open", frozenset({"endpoint": fake_openai.base_url}.items()))] == 1


def test_an_edit_counts_its_profile_call_to_the_tenant(fake_openai, world, committed):
    """Correcting a fact re-derives its user's profile with the model: that call is the tenant's, and a
    spent budget holds it too (the edit path opened no scope: its tokens went to no tenant)."""
    fact = Memory.objects.create(tenant=world.acme, kb=world.docs, kind=Memory.Kind.ATOMIC_FACT, user_id="u1",
                                 text="Alex works at Contoso.", metadata={"subject": "Alex"})
    fake_openai.queue("chat", reply_with_usage('{"items": []}', 60, 5))
    response = committed(api_client(world.alice_key).patch, f"/api/v1/memories/{fact.pk}",
                         {"text": "Alex works at Fabrikam."}, format="json")
    assert response.status_code == 200, response.content
    assert spent(world.acme, "profiles") == (1, 60, 5)
