"""The summary tree (issue 39): a document's episodes and a user's chat episodes clustered by their vectors
and summarised up to one root, stored as memories of kind "summary" cited to their leaves — built at the
index stage and after a flush, rebuilt by reindex, removed by every delete, kept to the tenant — on the
real embedded indexes (Milvus Lite, SQLite FTS5)."""

import io

import numpy as np
import pytest
from django.test import override_settings

from conversations.actions import accumulate_messages, flush_session
from tests.fake_openai import fake_openai  # noqa: F401  (fixture)
from ingest.actions import ingest_document
from ingest.tasks import run_inline
from memory.actions import delete_document, delete_knowledge_base, delete_tenant
from memory.curation import delete_memories_in_scope, delete_memory, set_memory_status
from memory.models import Chunk, Memory
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter
from retrieval.projection import reconcile, reindex
from retrieval.request import parse_search_request
from retrieval.search import search
from retrieval.summary_tree import cluster, summarise
from tenants.access import permitted_scope

pytestmark = pytest.mark.usefixtures("lite_vector_settings")

SPORTS = {
    "Skating": "Skating on the rink needs sharp skates. The skater leans on the outside edge. Figures are cut on the ice.",
    "Curling": "Curling stones slide along the ice to the tee. Sweepers brush the ice before the stone.",
    "Tobogganing": "The toboggan runs down the Cresta ice-run at great speed. Riders lie head first on the toboggan.",
    "Skiing": "Skiing needs long skis and patience. The beginner falls in the soft snow on the slope.",
    "Ice hockey": "Ice hockey is played with a puck and sticks. Two teams skate on the rink.",
    "Resorts": "Davos and St. Moritz are the great winter resorts. Their hotels face the sun.",
    "Parents": "Parents should send children with warm clothes. Boys and girls love the snow.",
}
BOOK = "# Winter Sports\n\n" + "\n\n".join(f"## {title}\n\n{text}" for title, text in SPORTS.items()) + "\n"


@pytest.fixture
def on(settings):
    settings.SUMMARY_TREE = True
    settings.LLM_ENABLED = False


def ingest(user, kb, text=BOOK, name="winter.md"):
    upload = ingest_document(permitted_scope(user, write=True), kb, io.BytesIO(text.encode()), name)
    document = run_inline(upload.document.pk)
    assert document.status == "ready", document.error
    return document


def nodes(**where):
    return list(Memory.objects.filter(kind="summary", **where))


def root(**where):
    return next(n for n in nodes(**where) if n.metadata.get("root"))


def index_ids(tenant_id, kb_id) -> dict[str, set[str]]:
    flt = IndexFilter(tenant_id=tenant_id, kb_ids=(kb_id,), kinds=("summary",), statuses=())
    return {"vector": set(vector_index().ids(flt)), "keyword": set(keyword_index().ids(flt))}


def keys(memories) -> set[str]:
    return {f"memory:{m.pk}" for m in memories}


def ask(user, query, types=("summary",)):
    return search(permitted_scope(user), parse_search_request({"query": query, "memory_types": list(types)}))


def test_a_document_gets_a_tree_cited_to_its_leaves(world, on):
    document = ingest(world.alice, world.docs)
    episodes = list(Memory.objects.filter(document=document, kind="episode"))
    assert len(episodes) >= len(SPORTS)
    top = root(document=document)
    assert set(top.metadata["leaves"]) == {str(e.pk) for e in episodes}  # the root covers every section
    assert top.metadata["level"] == max(n.metadata["level"] for n in nodes(document=document))
    parents = set(Chunk.objects.filter(document=document, level="parent").values_list("pk", flat=True))
    assert set(top.source_chunks.values_list("pk", flat=True)) == parents  # one citation per section
    for node in nodes(document=document):  # each node cites exactly the sections of its own leaves
        cited = set(node.source_chunks.values_list("pk", flat=True))
        assert cited == {c for e in episodes if str(e.pk) in node.metadata["leaves"]
                         for c in e.source_chunks.filter(level="parent").values_list("pk", flat=True)}
    assert index_ids(world.acme.pk, world.docs.pk) == {"vector": keys(nodes()), "keyword": keys(nodes())}
    found = ask(world.alice, "What winter sports does the book cover?")["episodes"]
    assert found and found[0]["memory_type"] == "summary" and found[0]["leaves"]
    assert {s["document_id"] for s in found[0]["sources"]} == {document.pk}


def test_hybrid_leaves_the_tree_out_unless_asked_or_switched_on(world, on, settings):
    ingest(world.alice, world.docs)
    # Over episodes alone the broad question finds nothing above the relevance floor; a summary answers it.
    plain = ask(world.alice, "What winter sports does the book cover?", ("episode",))
    assert all("memory_type" not in e for e in plain["episodes"])
    assert ask(world.alice, "skating rink", ("episode",))["episodes"][0].get("memory_type") is None
    settings.SUMMARY_TREE_IN_HYBRID = True
    mixed = ask(world.alice, "What winter sports does the book cover?", ("episode",))
    assert any(e.get("memory_type") == "summary" for e in mixed["episodes"])


def test_no_tree_is_built_when_off(world, settings):
    settings.SUMMARY_TREE = False
    ingest(world.alice, world.docs)
    assert nodes() == []
    assert ask(world.alice, "What does the book cover?")["episodes"] == []


def test_reindex_builds_rebuilds_and_removes_the_tree(world, settings):
    settings.SUMMARY_TREE, settings.LLM_ENABLED = False, False
    document = ingest(world.alice, world.docs)
    settings.SUMMARY_TREE = True
    assert reconcile(world.acme)["summary_trees"]["out_of_date"] == 1  # reconcile sees the tree it lacks
    reindex(world.acme)  # turned on: reindex builds the trees of what is already there
    built = nodes(document=document)
    assert built and index_ids(world.acme.pk, world.docs.pk)["vector"] == keys(built)
    report = reconcile(world.acme)
    assert report["vector"]["missing"] == 0 and report["summary_trees"]["out_of_date"] == 0
    reindex(world.acme)  # nothing changed: the same nodes
    assert keys(nodes(document=document)) == keys(built)
    for index in (vector_index(), keyword_index()):  # lost from the indexes: reconcile sees it, reindex repairs it
        index.delete(IndexFilter(tenant_id=world.acme.pk, kb_ids=(world.docs.pk,), kinds=("summary",), statuses=()))
    assert reconcile(world.acme)["vector"]["missing"] == len(built)
    reindex(world.acme)
    assert index_ids(world.acme.pk, world.docs.pk)["keyword"] == keys(built)
    settings.SUMMARY_TREE = False
    assert reconcile(world.acme, repair=True)["summary_trees"] == {"out_of_date": 1, "sample": [f"doc:{document.pk}"],
                                                                  "repaired": True}
    assert nodes() == []  # turned off: repaired, the trees go
    settings.SUMMARY_TREE = True
    reindex(world.acme)
    settings.SUMMARY_TREE = False
    reindex(world.acme)  # and reindex removes them too, from the database and both indexes
    assert nodes() == [] and index_ids(world.acme.pk, world.docs.pk) == {"vector": set(), "keyword": set()}


def test_a_disabled_or_deleted_episode_leaves_every_summary(world, on, committed):
    document = ingest(world.alice, world.docs)
    skating = Memory.objects.get(document=document, kind="episode", topic__icontains="Skating")
    committed(set_memory_status, Memory.objects.filter(pk=skating.pk), "disabled", actor="alice")
    assert str(skating.pk) not in root(document=document).metadata["leaves"]
    assert not any("outside edge" in n.text for n in nodes(document=document))
    curling = Memory.objects.get(document=document, kind="episode", topic__icontains="Curling")
    committed(delete_memory, permitted_scope(world.alice, write=True), curling)
    assert str(curling.pk) not in root(document=document).metadata["leaves"]
    assert not any("Sweepers" in n.text for n in nodes(document=document))
    assert index_ids(world.acme.pk, world.docs.pk)["vector"] == keys(nodes())  # the old nodes' rows are gone
    committed(delete_document, permitted_scope(world.alice, write=True), document)
    assert nodes() == [] and index_ids(world.acme.pk, world.docs.pk) == {"vector": set(), "keyword": set()}


CHATS = {
    "s1": ["I started skating lessons at the rink downtown.", "My coach says my edges are getting better."],
    "s2": ["We booked a ski trip to Davos for February.", "The kids want to try the toboggan run."],
    "s3": ["I finished the pottery class and made a blue bowl.", "Next I want to paint a lake at sunrise."],
}


def chat(world, committed, user="u1", kb=None):
    kb = kb or world.notes
    scope = permitted_scope(world.alice, write=True)
    for session, lines in CHATS.items():
        messages = [{"message_id": f"{session}-{i}", "sender_name": "Dana", "content": line,
                     "timestamp": f"2024-0{1 + list(CHATS).index(session)}-0{1 + i}T10:00:00Z"}
                    for i, line in enumerate(lines)]
        committed(accumulate_messages, scope, kb, user_id=user, session_id=session, messages=messages)
        committed(flush_session, scope, kb, user_id=user, session_id=session)


def test_a_user_gets_a_tree_across_sessions_and_a_deleted_session_leaves_it(world, on, committed):
    chat(world, committed)
    episodes = {str(e.pk) for e in Memory.objects.filter(user_id="u1", kind="episode")}
    # A flush rebuilds the tree once the user's episodes grew by a quarter; a reindex brings it up to date.
    assert len(episodes) > 2 and 2 <= len(root(user_id="u1").metadata["leaves"]) <= len(episodes)
    reindex(world.acme)
    top = root(user_id="u1")
    assert set(top.metadata["leaves"]) == episodes and top.session_id == ""
    found = ask(world.alice, "What did I tell you about skating, the ski trip and my pottery?")["episodes"]
    sessions = {s["session_id"] for s in found[0]["sources"]}
    assert found[0]["memory_type"] == "summary" and sessions == set(CHATS)  # each message with its own session
    committed(delete_memories_in_scope, permitted_scope(world.alice, write=True), [world.notes.pk],
              user_id="u1", session_id="s3")
    assert {m.session_id for n in nodes(user_id="u1") for m in Memory.objects.filter(pk__in=n.metadata["leaves"])} \
        == {"s1", "s2"}
    assert not any("pottery" in n.text for n in nodes(user_id="u1"))
    assert index_ids(world.acme.pk, world.notes.pk)["vector"] == keys(nodes(user_id="u1"))
    committed(delete_memories_in_scope, permitted_scope(world.alice, write=True), [world.notes.pk], user_id="u1")
    assert nodes() == [] and index_ids(world.acme.pk, world.notes.pk) == {"vector": set(), "keyword": set()}


def test_trees_stay_in_their_tenant(world, on):
    ingest(world.alice, world.docs)
    theirs = ingest(world.charlie, world.secret)  # the same book in another tenant: a tree of its own
    assert {n.tenant_id for n in nodes(document=theirs)} == {world.globex.pk}
    for user, tenant in ((world.alice, world.acme), (world.charlie, world.globex)):
        found = ask(user, "What winter sports does the book cover?")["episodes"]
        assert found and {str(e["id"]) for e in found} <= {str(n.pk) for n in nodes(tenant=tenant)}


def test_clustering_is_deterministic_and_every_level_shrinks():
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(40, 8))
    first = cluster.clusters(vectors)
    assert first == cluster.clusters(vectors) and len(first) < 40
    assert sorted(i for g in first for i in g) == list(range(40))


@override_settings(LLM_ENABLED=False)
def test_the_rules_keep_the_sentences_members_share():
    written = summarise.summarise([
        summarise.Member("Skating", "The rink opens at nine. Skating on the rink is free for children."),
        summarise.Member("Hockey", "Hockey teams train on the rink at night. A puck costs two francs."),
    ])
    assert written.by == "rules" and written.text.startswith("Skating; Hockey.")
    assert "rink" in written.text


def test_with_an_llm_the_model_writes_the_summary_and_the_rules_stand_in(fake_openai):
    fake_openai.queue_json({"topic": "Ice sports", "summary": "Skating and hockey share the town rink."})
    members = [summarise.Member("Skating", "Skating on the rink is free."),
               summarise.Member("Hockey", "Hockey teams train on the rink at night.")]
    written = summarise.summarise(members)
    assert (written.topic, written.text, written.by) == ("Ice sports", "Skating and hockey share the town rink.", "llm")
    assert "Hockey teams train" in fake_openai.bodies("chat")[0]["messages"][-1]["content"]
    assert summarise.identity() == "llm-1:fake-llm"  # another summariser: reindex rebuilds the trees
    # Unscripted, the server answers 500 on every attempt: the rules answer instead.
    assert summarise.summarise(members).by == "rules"


def test_asking_for_summaries_where_none_are_built_says_so(world, settings):
    settings.SUMMARY_TREE = False
    ingest(world.alice, world.docs)
    answer = ask(world.alice, "What does the book cover?")
    assert answer["episodes"] == [] and "SUMMARY_TREE is off" in " ".join(answer["query"]["notes"])


def test_deleting_the_knowledge_base_or_the_tenant_takes_the_trees(world, on, committed):
    ingest(world.alice, world.docs)
    theirs = ingest(world.charlie, world.secret)
    chat(world, committed)
    assert nodes(kb=world.docs) and nodes(kb=world.notes) and nodes(kb=world.secret)
    committed(delete_knowledge_base, permitted_scope(world.alice, write=True), world.docs)
    assert nodes(kb_id=world.docs.pk) == [] and index_ids(world.acme.pk, world.docs.pk)["vector"] == set()
    assert nodes(kb=world.notes) and nodes(document=theirs)  # the other KB's and the other tenant's stay
    committed(delete_tenant, world.acme, actor="staff")
    assert nodes(tenant_id=world.acme.pk) == [] and index_ids(world.acme.pk, world.notes.pk)["keyword"] == set()
    assert index_ids(world.globex.pk, world.secret.pk)["vector"] == keys(nodes(document=theirs))


def test_the_console_search_shows_summaries_when_asked(world, on):
    from django.test import Client

    ingest(world.alice, world.docs)
    client = Client()
    client.force_login(world.alice)
    asked = client.get("/search/?q=What+winter+sports+does+the+book+cover%3F&method=hybrid&summaries=1").content.decode()
    assert 'name="summaries" value="1" checked' in asked and ">summary<" in asked
    plain = client.get("/search/?q=What+winter+sports+does+the+book+cover%3F&method=hybrid").content.decode()
    assert ">summary<" not in plain
