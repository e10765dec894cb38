"""The LLM's supersede step (conversations/consolidation.py: _llm_supersedes): with a model configured it
decides which older facts a new one makes out of date, and a reply it cannot use leaves the decision
to the rules. Against tests/fake_openai.py's local server; extraction, indexes and search are real
(the model answers only the supersede prompt, so every other step uses the rules)."""

import json
import re
from datetime import datetime, timedelta, timezone

import pytest

from memory.models import Memory
from tests.conftest import api_client
from tests.fake_openai import Reply, _chat_body, fake_openai  # noqa: F401  (fixture)
from tests.test_conversation_api import ingest

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")

T0 = datetime(2023, 5, 8, 13, 0, tzinfo=timezone.utc)
SUPERSEDE_PROMPT = "Older facts about a user are listed"


@pytest.fixture
def alice(world):
    return api_client(world.alice_key)


def answer_supersede(fake, decide):
    """Answer the supersede prompt with decide(olds, news) -> reply dict, where olds and news map each
    listed letter and number to its fact's text; every other call fails (500), so the rules do it.
    Returns the prompts seen."""
    fallback, seen = fake._default_reply, []

    def reply(endpoint, body):
        said = body.get("messages", [{}])[0].get("content", "") if endpoint == "chat" else ""
        if SUPERSEDE_PROMPT not in said:
            return fallback(endpoint, body)
        seen.append(said)
        olds = dict(re.findall(r"^([A-Z]\d*)\. (.+)$", said.split("New facts:")[0], re.M))
        news = {int(n): t for n, t in re.findall(r"^(\d+)\. (.+)$", said.split("New facts:")[1], re.M)}
        return Reply(body=_chat_body(json.dumps(decide(olds, news))))

    fake._default_reply = reply
    return seen


def boston_then_chicago(alice, committed):
    ingest(alice, committed, session="a", prefix="a", start=T0, chat=[("Jon", "I live in Boston with my wife.")])
    ingest(alice, committed, session="b", prefix="b", start=T0 + timedelta(days=20),
           chat=[("Jon", "I just moved to Chicago with my wife, I live there now.")])


def fact(word):
    return Memory.objects.get(kind="atomic_fact", text__icontains=word, user_id="u1")


def by_word(table: dict, word: str):
    return next(key for key, text in table.items() if word in text)


def test_the_model_decides_which_older_fact_is_out_of_date(alice, committed, fake_openai):
    seen = answer_supersede(fake_openai, lambda olds, news: {"superseded": [
        {"new": by_word(news, "Chicago"), "old": [by_word(olds, "Boston")]}]})

    boston_then_chicago(alice, committed)

    assert seen and "Boston" in seen[0] and "Chicago" in seen[0]
    boston, chicago = fact("Boston"), fact("Chicago")
    assert (boston.status, boston.superseded_by_id, chicago.status) == ("superseded", chicago.pk, "active")


def test_when_the_model_says_nothing_is_out_of_date_nothing_is(alice, committed, fake_openai, settings):
    seen = answer_supersede(fake_openai, lambda olds, news: {"superseded": []})

    boston_then_chicago(alice, committed)

    assert seen
    assert fact("Boston").status == "active"  # the rules would have superseded it (the next test)


def test_a_reply_naming_facts_never_listed_leaves_it_to_the_rules(alice, committed, fake_openai):
    seen = answer_supersede(fake_openai, lambda olds, news: {"superseded": [{"new": 99, "old": ["ZZ"]}]})

    boston_then_chicago(alice, committed)

    assert len(seen) == 3  # retried with the reason (LLM_MAX_RETRIES=2), then the pattern heuristic
    boston, chicago = fact("Boston"), fact("Chicago")
    assert (boston.status, boston.superseded_by_id) == ("superseded", chicago.pk)
