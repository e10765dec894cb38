"""User profiles built on every flush from real LoCoMo turns and Chinese chats: explicit and implicit
items citing their facts and messages, superseded (with history) by a newer contradicting fact,
served by GET /profiles/{user_id} and in search's profiles[]."""

from datetime import datetime, timedelta, timezone

import pytest

from memory.models import Memory, MemoryHistory
from tests.conftest import api_client
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
