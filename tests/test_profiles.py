"""User profiles built on every flush from real LoCoMo turns and Chinese chats: explicit and implicit
items citing their facts and messages, superseded (with history) by a newer contradicting fact,
served by GET /profiles/{user_id} and in search's profiles[]; written by the LLM when one is
configured (the rules when it fails), and kept in step with deletes and edits of the facts."""

import json
from datetime import datetime, timedelta, timezone

import pytest
from django.db import transaction

from memory.models import Memory, MemoryHistory
from tests.conftest import api_client
from tests.fake_openai import Reply, _chat_body, fake_openai  # noqa: F401  (fixture)
from tests.test_conversation_api import ingest, search
from tests.test_foresight import locomo_turns

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")


@pytest.fixture
def alice(world):
    return api_client(world.alice_key)


def profile(client, user="u1", code=200, **params):
    response = client.get(f"/api/v1/profiles/{user}", params)
    assert response.status_code == code, response.content
    return response.json()


def locomo_session(alice, committed, session, dia_ids=None):
    when, turns = locomo_turns(0, session)
    chat = [(t["speaker"], t["text"]) for t in turns if dia_ids is None or t["dia_id"] in dia_ids]
    ingest(alice, committed, session=f"s{session}", chat=chat, prefix=f"{session}-", start=when)


def test_a_locomo_session_gives_each_speaker_cited_profile_items(alice, committed):
    locomo_session(alice, committed, 3, {"D3:13", "D3:14"})
    locomo_session(alice, committed, 4, {"D4:3"})
    body = profile(alice)
    assert body["subjects"] == ["Caroline", "Melanie"]
    items = {(i["subject"], i["category"], i["value"]) for i in body["items"]}
    assert {("Melanie", "family", "husband"), ("Melanie", "family", "kids")} <= items
    assert ("Caroline", "family", "grandma") in items
    husband = next(i for i in body["items"] if i["value"] == "husband")
    assert husband["text"] == "Melanie's family: husband" and husband["extraction_mode"] == "deterministic"
    assert "3-2" in husband["message_ids"] and husband["since"].startswith("2023-06-09")
    fact = Memory.objects.get(pk=husband["fact_ids"][0])
    assert fact.kind == "atomic_fact" and "husband" in fact.text
    assert profile(alice, subject="Caroline")["subjects"] == ["Caroline"]


def test_a_newer_contradicting_fact_supersedes_the_item_with_history(alice, committed):
    t0 = datetime(2023, 3, 1, 9, 0, tzinfo=timezone.utc)
    ingest(alice, committed, session="a", chat=[("李雷", "我住在北京，每天坐地铁去银行上班。"), ("韩梅梅", "北京冬天很冷吧。")], prefix="a", start=t0)
    ingest(alice, committed, session="b", chat=[("李雷", "我最近搬到了上海，离公司更近。")], prefix="b",
           start=t0 + timedelta(days=40))
    active = [i for i in profile(alice)["items"] if i["category"] == "location"]
    assert [(i["value"], i["status"]) for i in active] == [("上海", "active")]
    everything = {i["value"]: i for i in profile(alice, status="all")["items"] if i["category"] == "location"}
    assert everything["北京"]["status"] == "superseded" and everything["北京"]["superseded_by"] == everything["上海"]["id"]
    events = list(MemoryHistory.objects.filter(memory_id=everything["北京"]["id"]).order_by("created_at", "id")
                  .values_list("event", "new_status"))
    assert events == [("ADD", "active"), ("UPDATE", "superseded")]
    found = search(alice, "李雷住在哪里 上海")
    assert [p["value"] for p in found["profiles"] if p["category"] == "location"] == ["上海"]


def test_english_supersession_and_a_recurring_interest(alice, committed):
    t0 = datetime(2023, 5, 8, 13, 0, tzinfo=timezone.utc)
    ingest(alice, committed, session="a", prefix="a", start=t0, chat=[
        ("Jon", "I live in Boston with my wife."), ("Gina", "Nice! I painted a sunset over the lake yesterday.")])
    ingest(alice, committed, session="b", prefix="b", start=t0 + timedelta(days=20), chat=[
        ("Gina", "I finished painting my studio wall with a mural."), ("Jon", "I just moved to Chicago for work!")])
    ingest(alice, committed, session="c", prefix="c", start=t0 + timedelta(days=30), chat=[
        ("Gina", "My new canvas is a watercolour portrait of my grandma.")])
    items = profile(alice)["items"]
    assert [i["value"] for i in items if i["subject"] == "Jon" and i["category"] == "location"] == ["Chicago"]
    (interest,) = [i for i in items if i["category"] == "interest"]
    assert (interest["subject"], interest["value"], interest["kind"]) == ("Gina", "painting", "implicit")
    assert len(interest["fact_ids"]) == 3
    assert {p["value"] for p in search(alice, "Where does Jon live?")["profiles"] if p["category"] == "location"} == \
        {"Chicago"}


def test_no_profile_is_404_and_another_tenant_sees_none(world, alice, committed):
    profile(alice, user="nobody", code=404)
    locomo_session(alice, committed, 3, {"D3:14"})
    profile(api_client(world.charlie_key), code=404)
    assert profile(alice)["items"]
    assert "status" in profile(alice, code=400, status="superseded")["error"]


# --- With an LLM (tests/fake_openai.py's local server; everything else real)

T1 = datetime(2023, 3, 1, 9, 0, tzinfo=timezone.utc)
PROFILE_PROMPT = "You keep user profiles"


def answer_by_prompt(fake, **scripts):
    """Answer each chat call by its (system) prompt: extraction, profile; boundaries and fact supersession.

    `scripts` maps "extraction" / "profile" to lists of reply contents (str) or HTTP statuses (int),
    used in order; boundary detection always keeps one episode, the facts' supersession check finds none. The queue stays empty, so every
    call reaches this router."""
    phrases = {"extraction": "You turn one piece of source material", "profile": PROFILE_PROMPT,
               "foresight": "what it says about the future"}
    queues = {name: list(replies) for name, replies in scripts.items()}
    fallback = fake._default_reply

    def reply(endpoint, body):
        if endpoint != "chat":
            return fallback(endpoint, body)
        system = body["messages"][0]["content"]
        if "segment a chat log" in system:
            return Reply(body=_chat_body(json.dumps({"boundaries": [], "should_wait": False})))
        if "Older facts about a user are listed" in system:  # the facts' own supersession check
            return Reply(body=_chat_body(json.dumps({"superseded": []})))
        name = next((n for n, phrase in phrases.items() if phrase in system), None)
        if not queues.get(name):
            return Reply(status=500, body={"error": {"message": f"no scripted {name} reply left"}})
        content = queues[name].pop(0)
        if isinstance(content, int):
            return Reply(status=content, body={"error": {"message": "scripted failure"}})
        return Reply(body=_chat_body(content if isinstance(content, str) else json.dumps(content)))

    fake._default_reply = reply
    return queues


def extraction(*facts):
    """An extraction reply: (text, source number) per fact."""
    return {"topic": "Chat", "summary": "Li Lei and Han Meimei talked.",
            "facts": [{"text": t, "sources": [n], "occurred_at": None} for t, n in facts]}


def profile_calls(fake):
    return [b for b in fake.bodies("chat") if PROFILE_PROMPT in b["messages"][0]["content"]]


def test_with_an_llm_the_model_writes_the_items_and_hostile_ones_are_dropped(fake_openai, alice, committed):
    answer_by_prompt(fake_openai, extraction=[extraction(("Li Lei lives in Beijing.", 1),
                                                         ("Li Lei works as a bank clerk in Beijing.", 1),
                                                         ("Han Meimei finds Beijing winters cold.", 2))],
                     profile=[{"items": [
                         {"subject": "Li Lei", "category": "location", "value": "Beijing", "kind": "explicit",
                          "facts": [1]},
                         {"subject": "Li Lei", "category": "occupation", "value": "bank clerk", "facts": [2, 2, 9]},
                         {"subject": "Han Meimei", "category": "dislike", "value": "cold winters", "facts": [3]},
                         {"subject": "Mallory", "category": "location", "value": "Mars", "facts": [1]},
                         {"subject": "Li Lei", "category": "password", "value": "hunter2", "facts": [1]},
                         {"subject": "Li Lei", "category": "pet", "value": "cat", "facts": [99, 0, -1]},
                         {"subject": "Han Meimei", "category": "location", "value": "Paris", "facts": [1]},
                         {"subject": "Li Lei", "category": "goal", "value": "x\u0000y " + "long " * 50, "facts": [1]},
                     ]}])
    ingest(alice, committed, session="a", prefix="a", start=T1,
           chat=[("Li Lei", "I live in Beijing and work at a bank."), ("Han Meimei", "Beijing winters are cold!")])
    items = {(i["subject"], i["category"]): i for i in profile(alice)["items"]}
    assert set(items) == {("Li Lei", "location"), ("Li Lei", "occupation"), ("Han Meimei", "dislike"),
                          ("Li Lei", "goal")}
    assert all(i["extraction_mode"] == "llm" for i in items.values())
    assert items[("Li Lei", "location")]["text"] == "Li Lei lives in Beijing"
    assert items[("Li Lei", "occupation")]["message_ids"] == ["a1"] and len(items[("Li Lei", "occupation")]["fact_ids"]) == 1
    goal = items[("Li Lei", "goal")]["value"]
    assert "\x00" not in goal and goal.startswith("x y") and len(goal.split()) <= 8
    (call,) = profile_calls(fake_openai)
    prompt = call["messages"][1]["content"]
    assert "[1] (Li Lei) Li Lei lives in Beijing." in prompt and "(none)" in prompt


def test_llm_items_are_superseded_by_newer_ones_and_the_model_sees_the_current_profile(fake_openai, alice, committed):
    answer_by_prompt(fake_openai,
                     extraction=[extraction(("Li Lei lives in Beijing.", 1)), extraction(("Li Lei moved to Shanghai.", 1))],
                     profile=[{"items": [{"subject": "Li Lei", "category": "location", "value": "Beijing", "facts": [1]}]},
                              {"items": [{"subject": "Li Lei", "category": "location", "value": "Shanghai", "facts": [1]}]}])
    ingest(alice, committed, session="a", prefix="a", start=T1, chat=[("Li Lei", "I live in Beijing.")])
    ingest(alice, committed, session="b", prefix="b", start=T1 + timedelta(days=40),
           chat=[("Li Lei", "I just moved to Shanghai!")])
    everything = {i["value"]: i for i in profile(alice, status="all")["items"]}
    assert (everything["Shanghai"]["status"], everything["Beijing"]["status"]) == ("active", "superseded")
    assert everything["Beijing"]["superseded_by"] == everything["Shanghai"]["id"]
    assert list(MemoryHistory.objects.filter(memory_id=everything["Beijing"]["id"]).order_by("created_at", "id")
                .values_list("event", flat=True)) == ["ADD", "UPDATE"]
    second = profile_calls(fake_openai)[1]["messages"][1]["content"]
    assert '{"subject": "Li Lei", "category": "location", "value": "Beijing"}' in second


@pytest.mark.parametrize("failure", [[503, 503, 503], ["not json", "[1, 2]", '{"items": [{"subject": 1}]}'],
                                     ['{"items": ' + "[" * 100_000 + "]" * 100_000 + "}"] * 3],
                         ids=["http-errors", "garbage", "nested-100k-deep"])
def test_a_failing_model_leaves_the_rules_items(fake_openai, alice, committed, failure):
    answer_by_prompt(fake_openai, extraction=[extraction(("Li Lei: I live in Beijing.", 1))], profile=failure)
    ingest(alice, committed, session="a", prefix="a", start=T1, chat=[("Li Lei", "I live in Beijing.")])
    (item,) = profile(alice)["items"]
    assert (item["value"], item["extraction_mode"]) == ("Beijing", "deterministic")
    assert len(profile_calls(fake_openai)) == 3  # LLM_MAX_RETRIES + 1 attempts, then the rules


# --- Profiles follow the facts they cite: deletes and edits

def fact_of(item) -> Memory:
    return Memory.objects.get(pk=item["fact_ids"][0])


def test_deleting_a_fact_drops_the_item_it_alone_supported(alice, committed):
    ingest(alice, committed, session="a", prefix="a", start=T1, chat=[
        ("Jon", "I live in Boston with my wife."), ("Gina", "My wife loves Boston too.")])
    items = {(i["subject"], i["value"]): i for i in profile(alice)["items"]}
    location = items[("Jon", "Boston")]
    fact = fact_of(location)
    response = committed(alice.delete, f"/api/v1/memories/{fact.pk}")
    assert response.status_code in (200, 204), response.content
    left = {(i["subject"], i["value"]) for i in profile(alice)["items"]}
    assert ("Jon", "Boston") not in left and ("Jon", "wife") not in left and ("Gina", "wife") in left
    assert list(MemoryHistory.objects.filter(memory_id=location["id"]).order_by("created_at", "id")
                .values_list("event", flat=True)) == ["ADD", "DELETE"]
    assert not [p for p in search(alice, "Where does Jon live? Boston")["profiles"] if p["value"] == "Boston"]
    # Running the delete again is harmless.
    assert committed(alice.delete, f"/api/v1/memories/{fact.pk}").status_code in (204, 404)


def test_a_rolled_back_delete_of_a_fact_leaves_its_items_after_the_next_commit(alice, committed):
    ingest(alice, committed, session="a", prefix="a", start=T1, chat=[
        ("Jon", "I live in Boston with my wife."), ("Gina", "My wife loves Boston too.")])
    items = {(i["subject"], i["value"]): i for i in profile(alice)["items"]}
    fact, other = fact_of(items[("Jon", "Boston")]), fact_of(items[("Gina", "wife")])
    kept = str(fact.pk)
    with pytest.raises(RuntimeError), transaction.atomic():
        fact.delete()
        raise RuntimeError("the request failed after the delete")
    assert Memory.objects.filter(pk=kept).exists()
    assert committed(alice.delete, f"/api/v1/memories/{other.pk}").status_code in (200, 204)  # the next commit
    left = {(i["subject"], i["value"]): i for i in profile(alice)["items"]}
    assert ("Gina", "wife") not in left and kept in left[("Jon", "Boston")]["fact_ids"]


def test_deleting_the_newer_session_lets_the_older_item_stand_again(alice, committed):
    ingest(alice, committed, session="a", prefix="a", start=T1, chat=[("李雷", "我住在北京，每天坐地铁去银行上班。")])
    ingest(alice, committed, session="b", prefix="b", start=T1 + timedelta(days=40), chat=[("李雷", "我最近搬到了上海，离公司更近。")])
    assert [i["value"] for i in profile(alice)["items"] if i["category"] == "location"] == ["上海"]
    response = committed(alice.delete, "/api/v1/memories?user_id=u1&session_id=b")
    assert response.status_code == 200, response.content
    everything = [(i["value"], i["status"], i["superseded_by"]) for i in profile(alice, status="all")["items"]
                  if i["category"] == "location"]
    assert everything == [("北京", "active", None)]
    assert [p["value"] for p in search(alice, "李雷住在哪里 北京")["profiles"] if p["category"] == "location"] == ["北京"]


def test_an_interest_goes_when_fewer_than_three_facts_hold_it(alice, committed):
    t0 = datetime(2023, 5, 8, 13, 0, tzinfo=timezone.utc)
    for n, text in enumerate(["I painted a sunset over the lake yesterday.", "I finished painting my studio wall.",
                              "My new canvas is a watercolour portrait."]):
        ingest(alice, committed, session=f"p{n}", prefix=f"p{n}", start=t0 + timedelta(days=n), chat=[("Gina", text)])
    (interest,) = [i for i in profile(alice)["items"] if i["category"] == "interest"]
    assert committed(alice.delete, "/api/v1/memories?user_id=u1&session_id=p1").status_code == 200
    profile(alice, code=404, status="all")  # two painting facts are left: no interest, and no other item
    assert MemoryHistory.objects.filter(memory_id=interest["id"], event="DELETE").count() == 1


def test_editing_a_fact_re_derives_its_items(alice, committed):
    ingest(alice, committed, session="a", prefix="a", start=T1, chat=[("Jon", "I live in Boston.")])
    fact = fact_of(profile(alice)["items"][0])

    def patch(**body):
        response = committed(alice.patch, f"/api/v1/memories/{fact.pk}", body, format="json")
        assert response.status_code == 200, response.content

    patch(text="Jon lives in Denver.")
    (item,) = profile(alice)["items"]
    assert (item["value"], item["fact_ids"]) == ("Denver", [str(fact.pk)])
    assert [p["value"] for p in search(alice, "Where does Jon live? Denver")["profiles"]] == ["Denver"]
    patch(text="Jon lives in Denver.")  # the same text again changes nothing
    assert profile(alice)["items"] == [item]
    patch(status="disabled")
    profile(alice, code=404)
    patch(status="active")
    assert [i["value"] for i in profile(alice)["items"]] == ["Denver"]


def test_with_an_llm_an_edit_asks_the_model(fake_openai, alice, committed):
    answer_by_prompt(fake_openai, extraction=[extraction(("Li Lei lives in Beijing.", 1))],
                     profile=[{"items": [{"subject": "Li Lei", "category": "location", "value": "Beijing", "facts": [1]}]},
                              {"items": [{"subject": "Li Lei", "category": "location", "value": "Hangzhou", "facts": [1]}]}])
    ingest(alice, committed, session="a", prefix="a", start=T1, chat=[("Li Lei", "I live in Beijing.")])
    fact = fact_of(profile(alice)["items"][0])
    response = committed(alice.patch, f"/api/v1/memories/{fact.pk}", {"text": "Li Lei lives in Hangzhou."}, format="json")
    assert response.status_code == 200, response.content
    assert [(i["value"], i["extraction_mode"]) for i in profile(alice)["items"]] == [("Hangzhou", "llm")]
    assert "[1] (Li Lei) Li Lei lives in Hangzhou." in profile_calls(fake_openai)[1]["messages"][1]["content"]


def test_deleting_an_episode_takes_the_items_of_its_facts(world, alice, committed):
    ingest(alice, committed, session="a", prefix="a", start=T1, chat=[("Jon", "I live in Boston.")])
    ingest(alice, committed, session="b", prefix="b", start=T1 + timedelta(days=3), chat=[("Jon", "My dog Max loves the park.")])
    # Another tenant's user of the same id, with the same words: untouched by alice's deletes.
    charlie = api_client(world.charlie_key)
    ingest(charlie, committed, session="a", prefix="a", start=T1, chat=[("Jon", "I live in Boston.")])
    location = next(i for i in profile(alice)["items"] if i["category"] == "location")
    episode = fact_of(location).parent
    assert committed(alice.delete, f"/api/v1/memories/{episode.pk}").status_code in (200, 204)
    assert [i["category"] for i in profile(alice)["items"]] == ["pet"]
    assert [i["value"] for i in profile(charlie)["items"]] == ["Boston"]
