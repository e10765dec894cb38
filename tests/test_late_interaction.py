"""The late-interaction projection and stage: English only, rebuilt by reindex, checked by reconcile,
never a mix of two models' vectors, and each item's stage score in the response.

(Every delete path removing the token vectors is in tests/test_delete_paths.py.)
"""

from datetime import datetime, timezone

import pytest

from conversations.actions import accumulate_messages, flush_session
from memory.curation import delete_memories_in_scope
from memory.models import Memory, Message
from retrieval.backends import token_vectors
from retrieval.runtimes import colbert
from retrieval.runtimes.bundled_models import COLBERT
from retrieval.models import TokenVectors
from retrieval.projection import index_memories, reconcile, reindex
from retrieval.request import parse_search_request
from retrieval.search import search
from retrieval.search.late_interaction import source_keys
from tenants.access import permitted_scope

pytestmark = pytest.mark.usefixtures("lite_vector_settings")

ENGLISH = ["Caroline painted a sunrise over the lake for the art show",
           "Melanie ran a marathon in Boston last spring",
           "Jon planted tomatoes and basil on the balcony"]
CHINESE = ["张伟上个月在杭州开了一家咖啡馆"]


@pytest.fixture
def memories(world, settings, tmp_path):
    settings.SEARCH_LATE_INTERACTION = True
    settings.LOCI_INDEX_STATE = tmp_path / "index-builds.json"
    settings.LOCI_REINDEX_DRAIN_SECONDS = 0
    made = []
    for n, text in enumerate(ENGLISH + CHINESE):
        episode = Memory.objects.create(tenant=world.acme, kb=world.notes, kind=Memory.Kind.EPISODE, text=text,
                                        content_hash=f"e{n}")
        made += [episode, Memory.objects.create(tenant=world.acme, kb=world.notes, kind=Memory.Kind.ATOMIC_FACT,
                                                parent=episode, text=text, content_hash=f"f{n}")]
    index_memories(made)
    return made


def stored_texts() -> set[str]:
    return set(Memory.objects.filter(pk__in=TokenVectors.objects.values("memory_id")).values_list("text", flat=True))


def hybrid(world, query):
    scope = permitted_scope(world.alice, write=True)
    return search(scope, parse_search_request({"query": query, "method": "hybrid", "top_k": 5}))


def test_english_memories_get_token_vectors_and_chinese_ones_do_not(memories):
    assert stored_texts() == set(ENGLISH)
    assert TokenVectors.objects.count() == 2 * len(ENGLISH)  # each episode and its fact
    row = TokenVectors.objects.first()
    assert row.model == token_vectors.model().name and len(bytes(row.data)) == row.tokens * 128
    # The rows name the weights they were made by: another model file is another identity.
    assert COLBERT.model_sha256[:12] in row.model


def test_reconcile_reports_missing_and_stale_vectors_and_repair_restores_them(world, memories):
    assert reconcile(world.acme)["late_interaction"] == {"model": token_vectors.model().name, "expected": 6,
                                                          "missing": 0, "stale": 0, "sample_missing": [],
                                                          "repaired": False}
    TokenVectors.objects.filter(memory__text=ENGLISH[0]).delete()
    TokenVectors.objects.filter(memory__text=ENGLISH[1]).update(model="colbert-of-another-build")
    edited = Memory.objects.get(kind="atomic_fact", text=ENGLISH[2])
    Memory.objects.filter(pk=edited.pk).update(text="Jon planted peppers on the balcony")  # not re-projected

    report = reconcile(world.acme)["late_interaction"]
    assert (report["missing"], report["stale"]) == (5, 3)

    assert reconcile(world.acme, repair=True)["repaired"]
    report = reconcile(world.acme)["late_interaction"]
    assert (report["missing"], report["stale"]) == (0, 0)
    assert TokenVectors.objects.filter(model="colbert-of-another-build").count() == 0


def test_reindex_rebuilds_the_projection_from_the_database(world, memories):
    TokenVectors.objects.filter(memory__kind="atomic_fact").delete()
    TokenVectors.objects.filter(memory__kind="episode").update(model="colbert-of-another-build")

    reindex()

    assert stored_texts() == set(ENGLISH)
    assert set(TokenVectors.objects.values_list("model", flat=True)) == {token_vectors.model().name}
    assert TokenVectors.objects.count() == 2 * len(ENGLISH)
    assert reconcile(world.acme)["late_interaction"]["missing"] == 0


def test_the_stage_scores_english_items_and_leaves_chinese_queries_alone(world, memories):
    english = hybrid(world, "Who ran a marathon in Boston?")
    items = english["facts"] + english["episodes"]
    text = lambda it: it.get("atomic_fact") or it.get("summary")  # noqa: E731
    assert all("late_interaction" in it["scores"] for it in items if text(it) in ENGLISH)
    assert all("late_interaction" not in it["scores"] for it in items if text(it) in CHINESE)  # the item's gate
    assert english["facts"][0]["atomic_fact"] == ENGLISH[1]

    chinese = hybrid(world, "张伟在杭州开了什么店？")
    assert all("late_interaction" not in it["scores"] for it in chinese["facts"] + chinese["episodes"])


def test_vectors_of_another_model_are_never_read(world, memories, settings):
    """A changed model (its rows not yet rebuilt): the stage encodes the items itself, same scores."""
    def scored():
        response = hybrid(world, "Who planted tomatoes on the balcony?")
        return {it["id"]: it["scores"]["late_interaction"] for it in response["facts"] if it["atomic_fact"] in ENGLISH}

    before = scored()
    TokenVectors.objects.update(model="colbert-of-another-build", data=b"", tokens=0)  # unreadable if read

    after = scored()

    assert before and after.keys() == before.keys()
    assert all(abs(after[i] - before[i]) < 0.02 for i in before)


def test_with_the_stage_off_nothing_is_written_or_scored(world, settings):
    settings.SEARCH_LATE_INTERACTION = False
    episode = Memory.objects.create(tenant=world.acme, kb=world.notes, kind=Memory.Kind.EPISODE, text=ENGLISH[0],
                                    content_hash="x")
    index_memories([episode])
    assert TokenVectors.objects.count() == 0
    response = hybrid(world, "art show sunrise painting")
    assert all("late_interaction" not in it["scores"] for it in response["episodes"] + response["facts"])


def test_a_precise_search_reranks_with_the_local_cross_encoder(world, memories, settings):
    settings.RERANK_LOCAL = "ms-marco-en"
    scope = permitted_scope(world.alice, write=True)

    response = search(scope, parse_search_request({"query": "Who ran a marathon in Boston?", "method": "hybrid",
                                                   "top_k": 5, "rerank": True}))

    facts = response["facts"]
    assert facts[0]["atomic_fact"] == ENGLISH[1]
    assert all(0.0 <= f["scores"]["rerank"] <= 1.0 and f["score"] == f["scores"]["rerank"] for f in facts)


def test_the_why_view_shows_the_late_interaction_score(world, memories):
    from django.test import Client

    client = Client()
    client.force_login(world.alice)
    body = client.get("/search/?q=Who+ran+a+marathon+in+Boston%3F&method=hybrid").content.decode()

    assert "ColBERT MaxSim of the query" in body and "hybrid&#x27;s calibrated relevance" in body


# --- conversation memories are scored by their source messages, each encoded once

TURNS = [("Mel", "I adopted a tortoise named Sheldon last spring."),
         ("Ann", "My cello teacher moved to Lisbon in March."),
         ("Mel", "我女儿下周在波士顿有钢琴比赛。")]


@pytest.fixture
def chat(world, committed, settings, tmp_path):
    settings.SEARCH_LATE_INTERACTION = True
    settings.LOCI_INDEX_STATE = tmp_path / "index-builds.json"
    settings.LOCI_REINDEX_DRAIN_SECONDS = 0
    scope = permitted_scope(world.alice, write=True)
    messages = [{"message_id": f"m{i}", "sender_id": who.lower(), "sender_name": who, "content": text,
                 "timestamp": datetime(2024, 3, 1, 10, i, tzinfo=timezone.utc)} for i, (who, text) in enumerate(TURNS)]
    committed(accumulate_messages, scope, world.notes, user_id="u1", session_id="s1", messages=messages)
    committed(flush_session, scope, world.notes, user_id="u1", session_id="s1")
    return scope


def test_chat_memories_store_no_vectors_of_their_own_only_their_english_messages(chat):
    assert Memory.objects.filter(user_id="u1").count() > 2  # an episode and its facts
    stored = TokenVectors.objects.all()
    english = set(Message.objects.filter(content__in=[t for _, t in TURNS[:2]]).values_list("pk", flat=True))
    assert {row.message_id for row in stored} == english  # the Chinese turn has none
    assert not stored.filter(memory__isnull=False).exists()


def test_a_chat_fact_is_scored_by_its_source_message(world, chat):
    response = hybrid(world, "What is the name of Mel's tortoise?")
    fact = next(f for f in response["facts"] if "Sheldon" in f["atomic_fact"])
    [key] = source_keys([("facts", fact)])[0]
    model = token_vectors.model()
    expected = colbert.maxsim(model.encode_query("What is the name of Mel's tortoise?"),
                              token_vectors.load([key], model.name)[key])
    assert fact["scores"]["late_interaction"] == pytest.approx(expected, abs=1e-5)


def test_message_vectors_are_reconciled_rebuilt_and_deleted_with_the_session(world, chat):
    assert reconcile(world.acme)["late_interaction"]["missing"] == 0
    TokenVectors.objects.filter(message__content=TURNS[0][1]).delete()
    TokenVectors.objects.filter(message__content=TURNS[1][1]).update(text_sha="0" * 16)  # an edited message
    report = reconcile(world.acme)["late_interaction"]
    assert (report["missing"], report["stale"]) == (2, 1)

    reindex()
    assert reconcile(world.acme)["late_interaction"] == {"model": token_vectors.model().name, "expected": 2,
                                                          "missing": 0, "stale": 0, "sample_missing": [],
                                                          "repaired": False}

    delete_memories_in_scope(chat, [world.notes.pk], user_id="u1", session_id="s1")
    assert TokenVectors.objects.count() == 0
