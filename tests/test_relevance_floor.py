"""Relevance a user can trust: over a small English chat memory, a question it answers finds its
memory, and nonsense or an off-topic question gets "nothing answers this well" (query.weak, no items)
instead of a list of near-zero matches. The late-interaction stage's calibrated relevance is what
separates them (hybrid's alone scored nonsense 0.017–0.040, the answers 0.039–0.046).

Chinese queries, and English ones whose nearest items are Chinese (raised by the cross-language
shift), are not separated yet: the English model cannot judge them (bench/RESULTS.md, "Late
interaction and a local cross-encoder"; a multilingual reranker is the remedy).
"""

from datetime import datetime, timezone

import pytest

from conversations.actions import accumulate_messages, flush_session
from retrieval.request import parse_search_request
from retrieval.search import search
from tenants.access import permitted_scope

pytestmark = pytest.mark.usefixtures("lite_vector_settings")

TURNS = [
    ("Mel", "I adopted a tortoise named Sheldon last spring."),
    ("Ann", "Sheldon the tortoise, lovely! How old is he?"),
    ("Mel", "He is about forty years old and loves strawberries."),
    ("Ann", "My cello teacher moved to Lisbon in March, so I take lessons online now."),
    ("Mel", "Our greenhouse grows saffron crocus bulbs this year."),
    ("Ann", "Yesterday I baked sourdough bread with rye flour for the first time."),
    ("Mel", "My daughter has a piano competition in Boston next week."),
]
ANSWERED = {"What is the name of Mel's tortoise?": "Sheldon", "Where did Ann's cello teacher move?": "Lisbon",
            "What kind of bread did Ann bake?": "sourdough", "Where is the piano competition?": "Boston"}
NOT_ANSWERED = [
    "qwxz blorf zzyzx frobnicate",  # nonsense
    "What is the boiling point of tungsten in kelvin?",  # off-topic
    "How do I configure BGP route reflectors on a Juniper router?",
    "Which team won the 1998 football world cup final?",
]


@pytest.fixture
def memory(world, committed, settings):
    settings.SEARCH_LATE_INTERACTION = True
    scope = permitted_scope(world.alice, write=True)
    messages = [{"message_id": f"m{i}", "sender_id": who.lower(), "sender_name": who, "content": text,
                 "timestamp": datetime(2024, 3, 1, 10, i, tzinfo=timezone.utc)} for i, (who, text) in enumerate(TURNS)]
    committed(accumulate_messages, scope, world.notes, user_id="u1", session_id="s1", messages=messages)
    committed(flush_session, scope, world.notes, user_id="u1", session_id="s1")
    return scope


def hybrid(scope, query):
    return search(scope, parse_search_request({"query": query, "method": "hybrid", "top_k": 10}))


def texts(response):
    return [it.get("atomic_fact") or it.get("summary") for key in ("facts", "episodes") for it in response[key]]


@pytest.mark.parametrize("query", list(ANSWERED))
def test_a_question_the_memory_answers_finds_it(memory, query):
    response = hybrid(memory, query)
    assert not response["query"]["weak"]
    assert ANSWERED[query] in " ".join(texts(response)[:3])


@pytest.mark.parametrize("query", NOT_ANSWERED)
def test_nonsense_and_off_topic_questions_get_nothing_answers_well(memory, query):
    response = hybrid(memory, query)
    best = max((it["score"] for key in ("facts", "episodes") for it in response[key]), default=None)
    assert response["query"]["weak"], (best, texts(response)[:3])
    assert any("Nothing answers this well" in note for note in response["query"]["notes"])


# Questions a short chat answers only in part or in other words: the stage's map, fitted on whole
# LoCoMo conversations, put such answers under the 0.01 floor (session 10: a participant's episode
# at 0.003); fitted on short chats, it keeps them (bench/RESULTS.md, "Late interaction on by default").
LOOSELY_ANSWERED = {"What are the two of them up to with their pets and plants?": "tortoise",
                    "Has anyone changed how they learn music?": "cello",
                    "Any news about the kids?": "piano"}


@pytest.mark.parametrize("query", list(LOOSELY_ANSWERED))
def test_a_loosely_worded_question_still_finds_its_answer(memory, query):
    response = hybrid(memory, query)
    assert not response["query"]["weak"], response["query"]["notes"]
    assert LOOSELY_ANSWERED[query] in " ".join(texts(response)[:3])
