"""The ColBERT recall channel and its centroid index (issue 36): the index keeps the exact top messages
among its candidates, never proposes a message outside the search's tenant, KB, user or agent, goes
with every delete path, is rebuilt by reindex and checked by reconcile; a search with the channel on
finds a fact whose message only ColBERT ranks high.

The index tests store real ColBERT vectors of LoCoMo turns (conversations 0 and 1, as two users) on
Message rows made directly: extraction and embedding are not what they test, and encoding the ~800
turns once per module keeps the file quick.
"""

import json
from datetime import datetime, timedelta, timezone

import pytest

from conversations.actions import accumulate_messages, flush_session
from memory.actions import delete_knowledge_base, delete_tenant
from memory.curation import delete_memories_in_scope
from memory.models import Memory, Message
from retrieval.backends import token_codes, token_vectors
from retrieval.backends.base import IndexFilter
from retrieval.models import TokenCodebook, TokenVectors
from retrieval.projection import reconcile, reindex
from retrieval.request import parse_search_request
from retrieval.search import colbert_channel, colbert_partitions, search
from tenants.access import permitted_scope
from tests.shared_data import LOCOMO_DEV

pytestmark = pytest.mark.usefixtures("lite_vector_settings")

START = datetime(2023, 5, 8, 13, 0, tzinfo=timezone.utc)


def locomo(index: int) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(session, message_id, "speaker: text") of a LoCoMo dev conversation's turns, and its questions."""
    sample = json.loads(LOCOMO_DEV.read_text(encoding="utf-8"))[index]
    turns = [(key, t["dia_id"], f"{t['speaker']}: {t['text']}") for key, value in sample["conversation"].items()
             if key.startswith("session_") and isinstance(value, list) for t in value]
    questions = [qa["question"] for qa in sample["qa"] if qa.get("evidence")]
    return turns, questions


@pytest.fixture(scope="module")
def encoded():
    """Each fixture text's ColBERT matrix, encoded once for the module."""
    texts = {text for index in (0, 1) for _, _, text in locomo(index)[0]}
    texts |= {"Caroline: I keep a pet axolotl named Pebble in a tank by the window."}
    texts = sorted(texts)
    return dict(zip(texts, token_vectors.model().encode_documents(texts)))


def store(kb, user_id: str, turns, encoded, *, agent_id: str = "") -> list[Message]:
    """Messages with their stored vectors, written by the projection's own store (codes and all)."""
    messages = Message.objects.bulk_create([
        Message(tenant_id=kb.tenant_id, kb=kb, user_id=user_id, session_id=session, message_id=mid, agent_id=agent_id,
                sender_name="", content=text, timestamp=START + timedelta(minutes=i))
        for i, (session, mid, text) in enumerate(turns)])
    batch = [(f"message:{m.pk}", m.content) for m in messages]
    token_vectors._store(batch, [encoded[m.content] for m in messages], token_vectors.model().name)
    return messages


@pytest.fixture
def channel_on(settings, tmp_path):
    settings.SEARCH_LATE_INTERACTION = True
    settings.SEARCH_COLBERT_CHANNEL = True
    settings.LOCI_INDEX_STATE = tmp_path / "index-builds.json"
    settings.LOCI_REINDEX_DRAIN_SECONDS = 0
    colbert_partitions.forget()
    yield settings
    colbert_partitions.forget()


@pytest.fixture
def two_users(world, channel_on, encoded):
    """LoCoMo conversation 0 as user u1, conversation 1 as user u2, in acme's notes."""
    return {"u1": store(world.notes, "u1", locomo(0)[0], encoded), "u2": store(world.notes, "u2", locomo(1)[0], encoded)}


@pytest.fixture
def cited(world, two_users):
    """An episode per session citing its messages: the projection keeps vectors of cited messages only."""
    for user_id, messages in two_users.items():
        sessions: dict[str, list[str]] = {}
        for m in messages:
            sessions.setdefault(m.session_id, []).append(m.message_id)
        for session_id, ids in sessions.items():
            Memory.objects.create(tenant=world.acme, kb=world.notes, kind=Memory.Kind.EPISODE, user_id=user_id,
                                  session_id=session_id, source_message_ids=ids, content_hash=f"{user_id}{session_id}",
                                  text=f"{user_id} talked in {session_id}")
    return two_users


def flt(world, **narrowing) -> IndexFilter:
    return IndexFilter(tenant_id=world.acme.pk, kb_ids=(world.notes.pk,), **narrowing)


def query_vectors(text: str):
    return token_vectors.model().encode_query(text)


def test_a_kb_big_enough_gets_a_codebook_and_every_row_its_codes(world, two_users):
    book = TokenCodebook.objects.get(kb=world.notes)
    assert book.k == token_codes.k_for(book.fitted_tokens) and book.model == token_vectors.model().name
    assert book.name.startswith(book.model)  # the fit's parameters joined to the model's identity
    rows = TokenVectors.objects.filter(message__kb=world.notes)
    assert rows.filter(codebook=book).count() == rows.count() == len(two_users["u1"]) + len(two_users["u2"])
    row = rows.first()
    assert len(bytes(row.codes)) == row.tokens


def test_centroid_candidates_hold_the_exhaustive_top_20(world, two_users):
    part = colbert_partitions.partition(world.notes.pk, token_vectors.model().name)
    kept = total = 0
    for question in locomo(0)[1][:40]:
        q = query_vectors(question)
        exhaustive = colbert_channel.best_messages(q, flt(world, user_id="u1"), 20, exhaustive=True)
        candidates = set(colbert_channel.approximate(part, q, flt(world, user_id="u1"), 100))
        kept += len(candidates & set(exhaustive))
        total += len(exhaustive)
    # 100 of u1's ~420 messages; the prototype kept 94.1 % of the top 20 in its top 100.
    assert kept / total >= 0.95


def test_the_channel_finds_what_exhaustive_maxsim_finds(world, two_users):
    for question in locomo(0)[1][:20]:
        q = query_vectors(question)
        exhaustive = colbert_channel.best_messages(q, flt(world, user_id="u1"), 10, exhaustive=True)
        indexed = colbert_channel.best_messages(q, flt(world, user_id="u1"), 10)
        assert list(indexed)[:3] == list(exhaustive)[:3]
        assert indexed[next(iter(indexed))] == pytest.approx(max(exhaustive.values()), abs=1e-6)


def test_a_closer_message_of_another_tenant_kb_user_or_agent_never_surfaces(world, two_users, encoded):
    axolotl = [("session_1", "pet", "Caroline: I keep a pet axolotl named Pebble in a tank by the window.")]
    own = store(world.notes, "u1", [("session_1", "own", locomo(0)[0][0][2])], encoded, agent_id="helper")
    elsewhere = (store(world.secret, "u1", axolotl, encoded) + store(world.docs, "u1", axolotl, encoded)
                 + store(world.notes, "u2", axolotl, encoded) + store(world.notes, "u1", axolotl, encoded,
                                                                       agent_id="other-agent"))
    outside = {m.pk for m in elsewhere}
    q = query_vectors("What is the name of Caroline's axolotl?")
    for narrowing in ({"user_id": "u1", "agent_id": "helper"}, {"user_id": "u1", "agent_id": ""}):
        found = colbert_channel.best_messages(q, flt(world, **narrowing), 50)
        assert found and not outside & set(found)
    assert set(colbert_channel.best_messages(q, flt(world, user_id="u1", agent_id="helper"), 50)) == {own[0].pk}
    # A KB of another tenant named in the filter (never so from a scope) is still not read.
    mixed = IndexFilter(tenant_id=world.acme.pk, kb_ids=(world.notes.pk, world.secret.pk), user_id="u1")
    assert not outside & set(colbert_channel.best_messages(q, mixed, 50)) - {elsewhere[-1].pk}
    # Without the agent narrowing, u1's own copy (agent "other-agent") is in scope and first.
    assert next(iter(colbert_channel.best_messages(q, flt(world, user_id="u1"), 5))) == elsewhere[-1].pk


def test_deleting_a_user_a_kb_or_the_tenant_empties_the_centroid_data(world, two_users, encoded, committed):
    scope = permitted_scope(world.alice, write=True)
    committed(delete_memories_in_scope, scope, [world.notes.pk], user_id="u2")
    assert not TokenVectors.objects.filter(message__user_id="u2").exists()
    q = query_vectors(locomo(1)[1][0])
    assert not {m.pk for m in two_users["u2"]} & set(colbert_channel.best_messages(q, flt(world), 50))

    committed(delete_knowledge_base, scope, world.notes)
    assert not TokenCodebook.objects.exists() and not TokenVectors.objects.exists()

    store(world.docs, "u1", locomo(0)[0], encoded)
    assert TokenCodebook.objects.filter(kb=world.docs).exists()
    committed(delete_tenant, world.acme, actor="test")
    assert not TokenCodebook.objects.exists() and not TokenVectors.objects.exists()


def test_a_user_removal_drops_the_codebook_and_the_next_write_fits_one_without_them(world, two_users, committed):
    """Centroids are means of every user's tokens: none computed from a removed user's may stay."""
    assert TokenCodebook.objects.filter(kb=world.notes).exists()
    committed(delete_memories_in_scope, permitted_scope(world.alice, write=True), [world.notes.pk], user_id="u1")
    assert not TokenCodebook.objects.exists()
    q = query_vectors(locomo(1)[1][0])  # meanwhile the KB is scored exactly: u2's messages still found
    assert colbert_channel.best_messages(q, flt(world, user_id="u2"), 5)

    turns = [(session, f"again-{mid}", text) for session, mid, text in locomo(1)[0][:5]]
    store(world.notes, "u2", turns, {text: token_vectors.model().encode_documents([text])[0] for _, _, text in turns})
    book = TokenCodebook.objects.get(kb=world.notes)
    assert book.fitted_tokens == token_codes.kb_tokens(world.notes.pk, book.model)  # u2's tokens only
    assert not TokenVectors.objects.filter(message__kb=world.notes, codes__isnull=True).exists()


def test_reconcile_reports_and_repairs_missing_and_stale_codes(world, cited):
    two_users = cited
    assert reconcile(world.acme)["centroid_index"] == {"missing_codebooks": 0, "stale_codebooks": 0,
                                                        "uncoded_rows": 0, "repaired": False}
    pks = [m.pk for m in two_users["u1"][:7]]
    TokenVectors.objects.filter(message_id__in=pks[:4]).update(codes=None, codebook=None)
    TokenCodebook.objects.create(tenant=world.acme, kb=world.notes, model="colbert-of-another-build", name="x",
                                 k=1, fitted_tokens=1, centroids=b"")
    report = reconcile(world.acme)["centroid_index"]
    assert (report["uncoded_rows"], report["stale_codebooks"]) == (4, 1)
    assert reconcile(world.acme, repair=True)["repaired"]
    assert reconcile(world.acme)["centroid_index"]["uncoded_rows"] == 0
    assert TokenCodebook.objects.get().model == token_vectors.model().name

    TokenCodebook.objects.all().delete()  # the codes' codebook gone (SET_NULL): reported missing
    report = reconcile(world.acme, repair=True)["centroid_index"]
    assert report["missing_codebooks"] == 1 and report["repaired"]
    book = TokenCodebook.objects.get()
    assert not TokenVectors.objects.exclude(codebook=book).exists()


def test_uncoded_rows_are_still_found_before_a_repair(world, two_users):
    target = two_users["u1"][5]
    TokenVectors.objects.filter(message=target).update(codes=None, codebook=None)
    token_codes.bump([world.notes.pk])
    found = colbert_channel.best_messages(query_vectors(target.content), flt(world, user_id="u1"), 3)
    assert next(iter(found)) == target.pk


def test_reindex_refits_the_codebook_and_codes_every_row(world, cited):
    before = TokenCodebook.objects.get()
    TokenVectors.objects.filter(message__user_id="u2").update(codes=None, codebook=None)
    reindex()
    after = TokenCodebook.objects.get()
    assert after.generation > before.generation
    assert not TokenVectors.objects.filter(message__kb=world.notes).exclude(codebook=after).exists()


# --- the channel in a search

CHATS = {  # session: turns; one message says what the question asks, in a session about something else
    "s1": [("Mel", "We went hiking near the lake and the trail was muddy."),
           ("Ann", "Hiking after rain is the worst, my boots still smell of the lake."),
           ("Mel", "Oh and my sister Jo relocated to Denver, she bakes bread at a bakery there now."),
           ("Ann", "Next weekend we hike the lake trail again if it is dry.")],
    "s2": [("Mel", "I started a new job this month and we moved into a new office downtown."),
           ("Ann", "A new job and a move, what a busy month for you!"),
           ("Mel", "The new office has a rooftop garden where we eat lunch.")],
    "s3": [("Mel", "Grandma taught me to knit a scarf, the wool is bright yellow."),
           ("Ann", "A yellow scarf for winter, how cosy.")],
}


@pytest.fixture
def chat(world, committed, channel_on, settings):
    settings.MRAG_MAX_EPISODES = 1  # hybrid recalls one episode: what the channel adds is plain to see
    settings.MRAG_FACT_RECALL = False
    settings.MRAG_ENTITY_RECALL = False
    scope = permitted_scope(world.alice, write=True)
    for n, (session, turns) in enumerate(CHATS.items()):
        messages = [{"message_id": f"{session}-{i}", "sender_id": who.lower(), "sender_name": who, "content": text,
                     "timestamp": START + timedelta(days=n, minutes=i)} for i, (who, text) in enumerate(turns)]
        committed(accumulate_messages, scope, world.notes, user_id="u1", session_id=session, messages=messages)
        committed(flush_session, scope, world.notes, user_id="u1", session_id=session)
    return scope


def search_hybrid(world, query: str) -> dict:
    scope = permitted_scope(world.alice, write=True)
    return search(scope, parse_search_request({"query": query, "method": "hybrid", "top_k": 3}))


def test_with_the_channel_a_search_finds_the_fact_only_colbert_ranks_high(world, chat, settings):
    # Hybrid's one recalled episode is the one about Mel's new job and the move: its words are the
    # question's. The sister's move is one turn of a chat about hiking; ColBERT matches that turn.
    question = "Where did Mel's sister move for her new job?"
    settings.SEARCH_COLBERT_CHANNEL = False
    assert not any("Denver" in f["atomic_fact"] for f in search_hybrid(world, question)["facts"])
    settings.SEARCH_COLBERT_CHANNEL = True
    response = search_hybrid(world, question)
    assert "Denver" in response["facts"][0]["atomic_fact"]


def test_the_why_view_shows_the_channel_score_of_the_episodes_it_found(world, chat):
    response = search(permitted_scope(world.alice, write=True),
                      parse_search_request({"query": "Where did Mel's sister move for her new job?", "method": "hybrid",
                                            "top_k": 3, "memory_types": ["episode"]}))
    scores = [e["scores"].get("colbert_channel") for e in response["episodes"]]
    assert any(s is not None and 0 < s <= 1 for s in scores)
