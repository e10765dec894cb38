"""Candidate questions (issue 39): each fact's and chunk's questions, indexed as a projection that points
back to its source — written at ingestion, removed with the source, rebuilt by reindex, checked by
reconcile, kept to the tenant — and matched question to question in hybrid search, on the real
embedded indexes (Milvus Lite, SQLite FTS5)."""

import io

import pytest

from ingest.actions import ingest_document
from ingest.tasks import run_inline
from memory.actions import delete_document
from memory.curation import delete_memory
from memory.models import Chunk, Memory
from retrieval import builds, questions
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter
from retrieval.projection import reconcile, reindex
from retrieval.projection.questions import source_key
from retrieval.questions import chinese, english
from retrieval.search import questions as channel
from retrieval.search.engines import Engines
from tenants.access import permitted_scope
from tests.fake_openai import fake_openai  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("lite_vector_settings")

DOC_TEXT = ("Staff directory\n\nAlex Murphy works at Contoso. Alex Murphy joined Contoso in March 2021. "
            "The Lisbon office has 40 engineers.\n")


def test_it_asks_english_questions_of_a_statement():
    assert english.questions("Alex works at Contoso.") == ["Where does Alex work?", "Who works at Contoso?"]
    assert "When did Alex join Contoso?" in english.questions("Alex joined Contoso in March 2021.")
    assert "How many employees does the company have?" in english.questions("The company has 300 employees.")
    assert english.questions("Is this a question?") == []


def test_it_asks_chinese_questions_of_a_statement():
    assert chinese.questions("张伟在微软工作。") == ["张伟在哪里工作？", "谁在微软工作？"]
    assert chinese.questions("2017年3月5日，冰雪皇后品牌正式撤出台湾。") == ["什么时候冰雪皇后品牌正式撤出台湾？"]
    assert chinese.questions("公司有300名员工。") == ["公司有多少名员工？"]
    assert chinese.questions("李明是这家公司的创始人。") == ["谁是这家公司的创始人？"]


def test_it_reads_each_sentence_of_a_passage_in_its_language(settings):
    settings.LLM_ENABLED = False
    asked = questions.questions_for("Alex works at Contoso. 张伟在微软工作。")
    assert asked == ["Where does Alex work?", "Who works at Contoso?", "张伟在哪里工作？", "谁在微软工作？"]


def question_filter(tenant_id, kb_id, **narrow):
    return IndexFilter(tenant_id=tenant_id, kb_ids=(kb_id,), kinds=("question",), statuses=(), **narrow)


def question_rows(tenant_id, kb_id, **narrow) -> dict[str, set[str]]:
    flt = question_filter(tenant_id, kb_id, **narrow)
    return {"vector": set(vector_index().ids(flt)), "keyword": set(keyword_index().ids(flt))}


@pytest.fixture
def on(settings):
    settings.CANDIDATE_QUESTIONS = True
    settings.LLM_ENABLED = False


def ingest(world, user, kb, name="staff.txt"):
    upload = ingest_document(permitted_scope(user, write=True), kb, io.BytesIO(DOC_TEXT.encode()), name)
    document = run_inline(upload.document.pk)
    assert document.status == "ready", document.error
    return document


def test_questions_point_back_to_their_source(world, on):
    document = ingest(world, world.alice, world.docs)
    rows = question_rows(world.acme.pk, world.docs.pk)
    assert rows["vector"] and rows["vector"] == rows["keyword"]
    chunks = {f"chunk:{pk}" for pk in Chunk.objects.filter(document=document).values_list("pk", flat=True)}
    facts = {f"memory:{pk}" for pk in Memory.objects.filter(document=document, kind="atomic_fact").values_list("pk", flat=True)}
    sources = {source_key(i) for i in rows["vector"]}
    assert sources <= chunks | facts and sources & chunks and sources & facts
    hits = vector_index().search(embedder().embed_query("Where does Alex Murphy work?").tolist(),
                                 question_filter(world.acme.pk, world.docs.pk), 3)
    assert hits[0].extra["parent_id"] == source_key(hits[0].id)


def embedder():
    from retrieval.embeddings import embedder as configured
    return configured()


def test_deleting_the_source_removes_its_questions(world, on, committed):
    document = ingest(world, world.alice, world.docs)
    fact = Memory.objects.filter(document=document, kind="atomic_fact").first()
    of_fact = question_rows(world.acme.pk, world.docs.pk, parent_ids=(f"memory:{fact.pk}",))
    assert of_fact["vector"]
    committed(delete_memory, permitted_scope(world.alice, write=True), fact)
    assert question_rows(world.acme.pk, world.docs.pk, parent_ids=(f"memory:{fact.pk}",)) == {"vector": set(), "keyword": set()}
    assert question_rows(world.acme.pk, world.docs.pk)["vector"]  # the other sources' stay
    committed(delete_document, permitted_scope(world.alice, write=True), document)
    assert question_rows(world.acme.pk, world.docs.pk) == {"vector": set(), "keyword": set()}


def test_reconcile_and_reindex_rebuild_them(world, on):
    ingest(world, world.alice, world.docs)
    before = question_rows(world.acme.pk, world.docs.pk)
    for index in (vector_index(), keyword_index()):
        index.delete(question_filter(world.acme.pk, world.docs.pk))
    report = reconcile(world.acme)
    assert report["vector"]["missing"] == len(before["vector"]) and report["keyword"]["missing"] == len(before["keyword"])
    reindex(world.acme)
    assert question_rows(world.acme.pk, world.docs.pk) == before
    assert reconcile(world.acme)["vector"] == {"missing": 0, "stale": 0, "sample_missing": [], "sample_stale": []}


def test_a_rebuild_records_the_generator_and_a_changed_one_is_not_searched(world, on, settings, monkeypatch):
    ingest(world, world.alice, world.docs)
    reindex()  # everything: a new build
    live = builds.current().live
    assert live.questions == questions.RULES_VERSION
    assert question_rows(world.acme.pk, world.docs.pk)["vector"]
    assert channel.active(Engines("q", live))
    monkeypatch.setattr(questions, "RULES_VERSION", "rules-2")
    assert not channel.active(Engines("q", live))  # the build holds another generator's questions
    settings.CANDIDATE_QUESTIONS = False
    reindex()
    assert builds.current().live.questions == ""
    assert question_rows(world.acme.pk, world.docs.pk) == {"vector": set(), "keyword": set()}


def test_the_channel_lifts_only_the_tenants_own_sources(world, on):
    ingest(world, world.alice, world.docs)
    theirs = ingest(world, world.charlie, world.secret)
    acme = IndexFilter(tenant_id=world.acme.pk, kb_ids=(world.docs.pk, world.notes.pk))
    engines = Engines("Where does Alex Murphy work?")
    joined = {"chunks": ([], []), "facts": ([], [])}
    channel.lift(joined, channel.start(engines, acme, 20))
    lifted = {h.id for lists in joined.values() for hits in lists for h in hits}
    assert lifted and all(not i.startswith("question:") for i in lifted)
    own = {f"chunk:{pk}" for pk in Chunk.objects.filter(document__kb__tenant=world.acme).values_list("pk", flat=True)}
    own |= {f"memory:{pk}" for pk in Memory.objects.filter(tenant=world.acme).values_list("pk", flat=True)}
    assert lifted <= own
    theirs_ids = {f"chunk:{pk}" for pk in Chunk.objects.filter(document=theirs).values_list("pk", flat=True)}
    assert not lifted & theirs_ids
    facts = {h.id: h for h in joined["facts"][0]}
    assert all(h.extra["parent_id"].startswith("memory:") for h in facts.values())  # their episodes, for mRAG


def test_hybrid_search_answers_from_the_source_never_a_question(world, on):
    from retrieval.request import parse_search_request
    from retrieval.search import search

    ingest(world, world.alice, world.docs)
    response = search(permitted_scope(world.alice), parse_search_request(
        {"query": "Where does Alex Murphy work?", "method": "hybrid", "memory_types": ["atomic_fact", "chunk"]}))
    texts = [f.get("atomic_fact") or f.get("text") for f in response["facts"] + response["chunks"]]
    assert texts and all("?" not in t for t in texts)
    assert any("Contoso" in t for t in texts[:2])


def test_with_an_llm_it_asks_the_model_and_falls_back_to_the_rules(fake_openai, settings):
    settings.CANDIDATE_QUESTIONS = True
    fake_openai.queue_json({"questions": ["Which company employs Dana Wu?", "Who is Contoso's engineer?"]})
    assert questions.questions_for("Dana Wu works at Contoso.") == ["Which company employs Dana Wu?",
                                                                      "Who is Contoso's engineer?"]
    assert "Dana Wu works at Contoso." in fake_openai.bodies("chat")[0]["messages"][-1]["content"]
    assert questions.identity() == "llm-1:fake-llm"  # another generator than the rules: a build records it
    # Unscripted, the server answers 500 on every attempt: the rules answer instead.
    assert questions.questions_for("Erin Park works at Fabrikam.") == ["Where does Erin Park work?",
                                                                       "Who works at Fabrikam?"]
