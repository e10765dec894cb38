"""A user's life changing across sessions, end to end through the REST API (issue 28): a job, a dog,
a sister, a trip and a habit, then a new job and a move a month later, in English and Chinese mixed.

What a memory product exists for: the update supersedes the old fact with a history row, a question
about the present in either language is answered by the current value first, one about the past
still finds the old value, the profile holds the obvious items, and the habit is no plan.
"""

from datetime import datetime, timedelta, timezone

import pytest

from memory.models import Memory, MemoryHistory
from tests.conftest import api_client
from tests.test_conversation_api import ingest, search

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")

T0 = datetime(2023, 5, 8, 9, 0, tzinfo=timezone.utc)
FIRST = [
    ("Alex", "I work at Contoso as a data analyst."),
    ("Mia", "Nice! How do you like it?"),
    ("Alex", "I live in Boston with my dog Mochi."),
    ("Mia", "Mochi is adorable."),
    ("Alex", "My sister Lena is a nurse in Denver."),
    ("Alex", "I'm going to Japan next month for two weeks."),
    ("Alex", "我每天早上都带Mochi去公园散步。"),
    ("Mia", "听起来很不错！"),
]
LATER = [
    ("Alex", "Big news: I now work at Fabrikam!"),
    ("Mia", "Congratulations!"),
    ("Alex", "我已经搬到西雅图了。"),
    ("Mia", "西雅图很漂亮。"),
]


@pytest.fixture
def alice(world, committed):
    client = api_client(world.alice_key)
    ingest(client, committed, session="s1", chat=FIRST, prefix="a")
    ingest(client, committed, session="s2", chat=LATER, prefix="b", start=T0 + timedelta(days=40))
    return client


def fact(text: str) -> Memory:
    return Memory.objects.get(kind="atomic_fact", text__contains=text)


def first_mentioning(body: dict, values: tuple[str, ...]) -> str:
    """The first value named by the response's items in rank order (facts and episodes alike)."""
    ranked = sorted(body["facts"] + body["episodes"], key=lambda item: item["rank"])
    for item in ranked:
        text = item.get("atomic_fact") or item.get("summary")
        found = [(text.find(v), v) for v in values if v in text]
        if found:
            return min(found)[1]
    return ""


def test_the_new_job_and_the_move_supersede_the_old_ones_with_history(alice):
    old_job, new_job = fact("Contoso"), fact("Fabrikam")
    assert "Alex now works at Fabrikam" in new_job.text and new_job.status == "active"
    assert old_job.status == "superseded" and old_job.superseded_by_id == new_job.pk
    change = MemoryHistory.objects.get(memory_id=old_job.pk, event="UPDATE")
    assert (change.old_status, change.new_status) == ("active", "superseded")
    # Told in English, updated in Chinese.
    assert fact("Boston").status == "superseded" and fact("Boston").superseded_by_id == fact("搬到西雅图").pk


@pytest.mark.parametrize("question", ["Where do I work now?", "我现在在哪里工作？", "Which company am I currently at?"])
def test_a_question_about_the_present_gets_the_current_employer_first(alice, question):
    body = search(alice, question)
    assert first_mentioning(body, ("Fabrikam", "Contoso")) == "Fabrikam"
    # The older job is still there, under the newer one and marked: the update is evidence of both.
    new = next(f for f in body["facts"] if "Fabrikam" in f["atomic_fact"])
    old = next(f for f in body["facts"] if "Contoso" in f["atomic_fact"])
    assert old["status"] == "superseded" and old["rank"] > new["rank"]


@pytest.mark.parametrize("question", ["Where did I use to work before?", "我以前在哪里工作？"])
def test_a_question_about_the_past_still_finds_the_old_employer(alice, question):
    facts = search(alice, question)["facts"]
    old = [f for f in facts if "Contoso" in f["atomic_fact"]]
    assert old and old[0]["status"] == "superseded" and old[0]["superseded_by"] == str(fact("Fabrikam").pk)
    new = next(f for f in facts if "Fabrikam" in f["atomic_fact"])
    assert old[0]["rank"] < new["rank"]  # about the past: the older value first


def test_the_profile_holds_the_obvious_items_each_citing_its_facts(alice):
    body = alice.get("/api/v1/profiles/u1").json()
    items = {(i["category"], i["value"]) for i in body["items"] if i["subject"] == "Alex"}
    expected = {("occupation", "Fabrikam"), ("pet", "dog Mochi"), ("family", "sister"), ("goal", "travel to Japan"),
                ("location", "西雅图")}
    assert len(expected & items) >= 4, items
    assert ("occupation", "Contoso") not in items and ("location", "Boston") not in items
    assert any(c == "habit" and "散步" in v for c, v in items)
    assert all(i["fact_ids"] for i in body["items"])


def test_the_trip_is_foresight_and_the_daily_walk_is_not(alice):
    plans = [m.text for m in Memory.objects.filter(kind="foresight")]
    assert any("Japan" in p for p in plans) and not any("散步" in p for p in plans)
