"""The search as a declared pipeline (issue 38): every stage of a real search is held to what it
declares it writes, every result's trail ends on its score, and the order can be printed."""

import copy
import dataclasses
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from retrieval.request import parse_search_request
from retrieval.search import search
from retrieval.search.pipeline import Found, record_trail
from retrieval.search.pipeline import LISTS
from retrieval.search.order import PIPELINE
from tenants.access import Scope
from tenants.models import KnowledgeBase
from tests.conftest import api_client
from tests.test_conversation_api import T0, ingest

pytestmark = pytest.mark.usefixtures("lite_vector_settings")

FIRST = [
    ("Alex", "I work as a data engineer at Contoso in Shanghai."),
    ("Mia", "Sounds like a big team. Do you like it?"),
    ("Alex", "I have a dog named Mochi and we walk by the river every morning."),
]
LATER = [
    ("Alex", "Big news: I quit Contoso last week."),
    ("Mia", "Wow, what happened?"),
    ("Alex", "I now work at Fabrikam as a machine learning engineer."),
    ("Mia", "Congratulations! Mochi must be happy too."),
]

REQUESTS = [
    {"query": "Where do I work now?"},
    {"query": "Where did Alex use to work?", "expand_context": True, "neighbours": 1,
     "filters": {"participant": "Alex"}},
    {"query": "我的狗叫什么名字？", "memory_types": ["episode", "atomic_fact", "profile", "agent_case"]},
    {"query": "dog river", "method": "keyword"},
    {"query": "machine learning engineer", "method": "vector"},
]


@pytest.fixture
def alex(world, committed):
    client = api_client(world.alice_key)
    ingest(client, committed, session="s1", chat=FIRST, prefix="a")
    ingest(client, committed, session="s2", chat=LATER, prefix="b", start=T0 + timedelta(days=30))
    kb_ids = frozenset(KnowledgeBase.objects.filter(tenant=world.acme).values_list("id", flat=True))
    return Scope(world.acme, kb_ids, False, False, "test")


def _state(found: Found) -> dict:
    """Every field of `found` and every list of its response, as values to compare."""
    fields = {f.name: getattr(found, f.name) for f in dataclasses.fields(found) if f.name not in ("run", "response")}
    return copy.deepcopy({**fields, **found.response})


def test_each_stage_changes_only_what_it_declares_and_every_stage_runs_in_some_search(alex):
    ran, before = set(), {}

    def observe(stage, found, when):
        if when == "before":
            before[stage.name] = _state(found)
            return
        after = _state(found)
        changed = {key for key in before[stage.name].keys() | after.keys()
                   if before[stage.name].get(key) != after.get(key)}
        allowed = set(stage.writes) | (set(after) if "response" in stage.writes else set())
        assert changed <= allowed, (stage.name, changed - allowed)
        ran.add(stage.name)

    for body in REQUESTS:
        response = search(alex, parse_search_request({"filters": {}, **body}), observe=observe)
        for key in LISTS:
            for item in response.get(key, []):
                # The badge is the last step's number, and the first step is the one that found it.
                assert item["trail"][-1]["score"] == pytest.approx(item["score"], abs=1e-6), (key, item["trail"])
                # (memory_kinds adds profiles and agent memory, tense the value a fact replaced)
                assert item["trail"][0]["stage"] in ("retrieve", "memory_kinds", "tense"), item["trail"]
    # rerank runs only with a reranker configured; multilingual, late interaction and the bridge per settings.
    optional = {"rerank", "multilingual", "late_interaction", "covered", "query_bridge"}
    assert {stage.name for stage in PIPELINE} - optional <= ran


def test_the_api_returns_the_trail_and_agrees_with_its_schema(world, alex, api_schema_check):
    response = api_client(world.alice_key).post(
        "/api/v1/memories/search", {"query": "Where do I work now?"}, format="json")
    assert response.status_code == 200, response.content
    fact = response.json()["facts"][0]
    assert fact["trail"][0]["stage"] == "retrieve" and fact["trail"][-1]["score"] == fact["score"]


def test_a_superseded_fact_shows_the_tense_step_that_moved_it(world, alex):
    response = search(alex, parse_search_request({"query": "Where do I work now?", "filters": {}}))
    old = next(f for f in response["facts"] if "Contoso" in f["atomic_fact"] and f.get("status") == "superseded")
    assert "tense" in [step["stage"] for step in old["trail"]]


def test_a_copied_item_does_not_share_its_trail():
    """The reranker returns copies: a step recorded on the copy must not appear on the original."""
    original = {"score": 0.5}
    response = {"facts": [original]}
    record_trail(response, "retrieve")
    response["facts"] = [{**original, "score": 0.9}]
    record_trail(response, "rerank")
    assert [s["stage"] for s in original["trail"]] == ["retrieve"]
    assert [s["stage"] for s in response["facts"][0]["trail"]] == ["retrieve", "rerank"]


def test_manage_py_search_explain_prints_the_stages_in_order(world, alex):
    out = StringIO()
    call_command("search", "Where do I work now?", tenant=world.acme.slug, explain=True, stdout=out)
    text = out.getvalue()
    positions = [text.index(f" {stage.name} ") for stage in PIPELINE]
    assert positions == sorted(positions), text
    assert "ran" in text and "skipped" in text  # e.g. rerank without a reranker
