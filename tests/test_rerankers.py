"""Rerankers over real HTTP: the /rerank endpoint, the LLM judge, failover, and configuration."""

import json
import logging
import math

import pytest
from django.core.exceptions import ImproperlyConfigured

from retrieval.runtimes.rerankers import FailoverReranker, HttpReranker, LlmJudgeReranker, RerankError, reranker
from tests.fake_openai import Reply, fake_openai  # noqa: F401  (fixture)

QUERY = "how do I reset my password"
TEXTS = ["Billing happens monthly.", "To reset your password open Settings.", "Passwords must be 12 characters."]


def test_http_reranker_returns_scores_in_the_texts_order(fake_openai):
    fake_openai.queue_rerank([0.1, 0.9, 0.5])  # the server lists results best first

    scores = HttpReranker(base_url=fake_openai.base_url, model="fake-rerank", api_key="rk").rerank(QUERY, TEXTS)

    assert scores == [0.1, 0.9, 0.5]
    (request,) = fake_openai.requests
    assert request.body == {"model": "fake-rerank", "query": QUERY, "documents": TEXTS, "top_n": 3}
    assert request.headers["authorization"] == "Bearer rk"


def test_http_reranker_accepts_tei_style_bare_lists(fake_openai):
    fake_openai.queue("rerank", Reply(body=json.dumps([{"index": 1, "score": 2.5}, {"index": 0, "score": -1.0}])))

    assert HttpReranker(base_url=fake_openai.base_url, model="m").rerank(QUERY, TEXTS[:2]) == [-1.0, 2.5]


def test_http_reranker_splits_long_lists_into_batches(fake_openai):
    texts = [f"password reset step {i}" if i % 2 else f"unrelated {i}" for i in range(70)]

    scores = HttpReranker(base_url=fake_openai.base_url, model="m", batch_size=64).rerank("password reset", texts)

    assert [len(b["documents"]) for b in fake_openai.bodies("rerank")] == [64, 6]
    assert len(scores) == 70 and scores[69] > scores[68]


def test_http_reranker_refuses_an_incomplete_reply(fake_openai):
    fake_openai.queue("rerank", Reply(body={"results": [{"index": 0, "relevance_score": 0.3}]}))

    with pytest.raises(RerankError, match="scored 1 of 3"):
        HttpReranker(base_url=fake_openai.base_url, model="m").rerank(QUERY, TEXTS)


def test_http_reranker_raises_rerank_error_on_a_server_error(fake_openai):
    fake_openai.queue_error("rerank", 500)

    with pytest.raises(RerankError, match="failed"):
        HttpReranker(base_url=fake_openai.base_url, model="m", max_retries=0).rerank(QUERY, TEXTS)


def test_llm_judge_scores_passages_from_zero_to_one(fake_openai):
    fake_openai.queue_json({"scores": [0, 10, 6]})

    assert LlmJudgeReranker().rerank(QUERY, TEXTS) == [0.0, 1.0, 0.6]
    prompt = fake_openai.bodies("chat")[0]["messages"][-1]["content"]
    assert QUERY in prompt and "[1] To reset your password open Settings." in prompt


def test_llm_judge_retries_a_score_list_of_the_wrong_length(fake_openai):
    fake_openai.queue_json({"scores": [3, 4]})
    fake_openai.queue_json({"scores": [3, 4, 5]})

    assert LlmJudgeReranker(max_attempts=2).rerank(QUERY, TEXTS) == [0.3, 0.4, 0.5]


def test_llm_judge_raises_rerank_error_when_the_llm_gives_up(fake_openai):
    fake_openai.queue_chat("no", "no")

    with pytest.raises(RerankError, match="LLM judge"):
        LlmJudgeReranker(max_attempts=2).rerank(QUERY, TEXTS)


def test_configured_reranker_fails_over_to_the_llm_judge(fake_openai, settings, caplog):
    settings.RERANK_FALLBACK = "llm"
    fake_openai.queue_error("rerank", 503)
    fake_openai.queue_json({"scores": [1, 9, 4]})

    chosen = reranker()
    with caplog.at_level(logging.WARNING, logger="retrieval.runtimes.rerankers"):
        scores = chosen.rerank(QUERY, TEXTS)

    assert isinstance(chosen, FailoverReranker)
    assert scores == [0.1, 0.9, 0.4]
    assert len(fake_openai.bodies("rerank")) == 1  # no client-side retry when a fallback is at hand
    assert any("using fallback llm-judge" in r.getMessage() for r in caplog.records)


def test_failover_reranker_raises_when_both_fail(fake_openai):
    fake_openai.queue_error("rerank", 500)
    fake_openai.queue_chat("garbage")
    pair = FailoverReranker(HttpReranker(base_url=fake_openai.base_url, model="m", max_retries=0), LlmJudgeReranker(max_attempts=1))

    with pytest.raises(RerankError, match="both rerankers failed"):
        pair.rerank(QUERY, TEXTS)


def test_reranker_is_none_when_not_configured(settings):
    settings.RERANK_BASE_URL, settings.RERANK_MODEL, settings.RERANK_FALLBACK = "", "", ""

    assert reranker() is None


def test_reranker_is_the_llm_judge_alone_when_only_the_fallback_is_set(fake_openai, settings):
    settings.RERANK_BASE_URL, settings.RERANK_MODEL, settings.RERANK_FALLBACK = "", "", "llm"

    assert isinstance(reranker(), LlmJudgeReranker)
    settings.LLM_ENABLED = False
    assert reranker() is None


def test_a_rerank_url_without_a_model_is_a_configuration_error(settings):
    settings.RERANK_BASE_URL, settings.RERANK_MODEL = "http://127.0.0.1:9/v1", ""

    with pytest.raises(ImproperlyConfigured):
        reranker()


ZH_QUERY = "怎样重置密码"
ZH_TEXTS = ["账单每月结算一次。", "要重置密码，请打开设置，点击“忘记密码”。", "The office is closed on Sundays."]


@pytest.fixture
def multilingual(settings):
    settings.RERANK_MULTILINGUAL = True
    settings.RERANK_BASE_URL, settings.RERANK_MODEL, settings.RERANK_FALLBACK = "", "", ""


def test_the_bundled_multilingual_reranker_keeps_the_contract(multilingual):
    from retrieval.runtimes.e5_rerank import E5CrossReranker, LanguageGateReranker

    chosen = reranker()
    scores = chosen.rerank(ZH_QUERY, ZH_TEXTS)

    assert isinstance(chosen, LanguageGateReranker) and isinstance(chosen.multilingual, E5CrossReranker)
    assert chosen.name.startswith("e5x-rerank@int8-") and chosen.thread_safe
    assert len(scores) == 3 and all(isinstance(s, float) and math.isfinite(s) for s in scores)
    assert max(range(3), key=scores.__getitem__) == 1  # the passage that answers, in Chinese
    assert chosen.rerank(ZH_QUERY, []) == []
    with pytest.raises(TypeError):
        chosen.rerank(ZH_QUERY, ZH_TEXTS[1])
    with pytest.raises(TypeError):
        chosen.rerank(None, ZH_TEXTS)


def test_the_language_gate_sends_chinese_calls_to_the_bundled_model_and_english_ones_to_the_configured(
        multilingual, fake_openai, settings):
    settings.RERANK_BASE_URL, settings.RERANK_MODEL = fake_openai.base_url, "english-rerank"
    fake_openai.queue_rerank([0.1, 0.9, 0.5])

    chosen = reranker()
    chinese = chosen.rerank(ZH_QUERY, TEXTS)  # a Chinese question over English passages: cross-language
    english = chosen.rerank(QUERY, TEXTS)

    assert len(fake_openai.bodies("rerank")) == 1  # only the English call reached the HTTP reranker
    assert english == [0.1, 0.9, 0.5]
    assert max(range(3), key=chinese.__getitem__) == 1  # "To reset your password open Settings."
