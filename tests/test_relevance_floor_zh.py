"""Relevance a user can trust, in Chinese and across languages: over a small Chinese chat memory, a
question it answers (in Chinese, or in English) finds its memory, and Chinese nonsense, an off-topic
Chinese question, or English nonsense whose nearest items are Chinese get "nothing answers this
well" (query.weak, no items). The multilingual stage's calibrated relevance separates them (retrieval/search/multilingual.py,
its map fitted on CMRC); hybrid alone scored all of them 0.022-0.038, over the floor. Chinese
nonsense is not separated yet (marked below; bench/RESULTS.md, "e5x-rerank v1").
The English half is tests/test_relevance_floor.py.
"""

from datetime import datetime, timezone

import pytest

from conversations.actions import accumulate_messages, flush_session
from retrieval.request import parse_search_request
from retrieval.search import multilingual, search
from tenants.access import permitted_scope

pytestmark = pytest.mark.usefixtures("lite_vector_settings")

TURNS = [
    ("小明", "我去年春天领养了一只乌龟，名叫谢尔顿。"),
    ("小红", "谢尔顿真可爱！它几岁了？"),
    ("小明", "它大概四十岁了，最爱吃草莓。"),
    ("小红", "我的大提琴老师三月搬到了里斯本，所以我现在在网上上课。"),
    ("小明", "我们的温室今年种了藏红花的球茎。"),
    ("小红", "昨天我第一次用黑麦粉烤了酸面包。"),
    ("小明", "我女儿下周在波士顿参加钢琴比赛。"),
]
ANSWERED = {"小明的乌龟叫什么名字？": "谢尔顿", "小红的大提琴老师搬到哪里去了？": "里斯本",
            "钢琴比赛在哪个城市举行？": "波士顿", "小红烤了什么面包？": "酸面包"}
NOT_ANSWERED = [
    "钨的沸点是多少开尔文？",  # off-topic
    "如何在Juniper路由器上配置BGP路由反射器？",
    "1998年世界杯决赛是哪支球队赢的？",
    "qwxz blorf zzyzx frobnicate",  # English nonsense: its nearest items are Chinese (the cross-language shift)
]
NOT_YET = ["阿巴阿巴 咕噜咕噜 嘀嗒嘀嗒"]  # Chinese nonsense: still over the floor with e5x-rerank v1


@pytest.fixture
def memory(world, committed, settings):
    settings.SEARCH_MULTILINGUAL_RERANK = True
    scope = permitted_scope(world.alice, write=True)
    messages = [{"message_id": f"m{i}", "sender_id": f"u{i % 2}", "sender_name": who, "content": text,
                 "timestamp": datetime(2024, 3, 1, 10, i, tzinfo=timezone.utc)} for i, (who, text) in enumerate(TURNS)]
    committed(accumulate_messages, scope, world.notes, user_id="u1", session_id="s1", messages=messages)
    committed(flush_session, scope, world.notes, user_id="u1", session_id="s1")
    multilingual.model()  # loaded as a started process's warm-up loads it: outside the search's CPU budget
    return scope


def hybrid(scope, query):
    return search(scope, parse_search_request({"query": query, "method": "hybrid", "top_k": 10}))


def texts(response):
    return [it.get("atomic_fact") or it.get("summary") for key in ("facts", "episodes") for it in response[key]]


def best(response):
    return max((it["score"] for key in ("facts", "episodes") for it in response[key]), default=None)


@pytest.mark.parametrize("query", list(ANSWERED))
def test_a_chinese_question_the_memory_answers_finds_it(memory, query):
    response = hybrid(memory, query)
    assert not response["query"]["weak"]
    assert ANSWERED[query] in " ".join(texts(response)[:3]), (best(response), texts(response)[:3])


@pytest.mark.parametrize("query", NOT_ANSWERED)
def test_chinese_nonsense_and_off_topic_questions_get_nothing_answers_well(memory, query):
    response = hybrid(memory, query)
    assert response["query"]["weak"], (best(response), texts(response)[:3])
    assert any("Nothing answers this well" in note for note in response["query"]["notes"])


# Not solved (bench/RESULTS.md, "e5x-rerank v1"): with v1 and its fitted map, Chinese nonsense still
# scores over the 0.01 floor (on CMRC, 4 of 10 held-out noise queries go under it, not all). Strict:
# the day a better model separates it, this fails and the marker goes.
@pytest.mark.xfail(strict=True, reason="e5x-rerank v1 does not yet separate Chinese nonsense")
@pytest.mark.parametrize("query", NOT_YET)
def test_chinese_nonsense_gets_nothing_answers_well(memory, query):
    test_chinese_nonsense_and_off_topic_questions_get_nothing_answers_well(memory, query)


def test_the_why_view_shows_the_stage_score(memory):
    response = hybrid(memory, "小明的乌龟叫什么名字？")
    top = (response["facts"] + response["episodes"])[0]
    assert "multilingual" in top["scores"] and "hybrid_relevance" in top["scores"]
