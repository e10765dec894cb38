"""Real files through the real pipeline (parse → chunk → extract → embed/index) and back out through search."""

import shutil
import zipfile

import pytest

from ingest.actions import ingest_document, rerun_document
from ingest.tasks import run_inline
from memory.actions import delete_document
from memory.models import Chunk, Document, Memory
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter
from retrieval.projection import reconcile, refill_empty_keyword_index
from retrieval.request import parse_search_request
from retrieval.search import search
from tenants.access import permitted_scope
from tests.conftest import DOCS, SHARED_DATA

# The warm embedding cache (tests/conftest.py): these tests check what the pipeline stores and what
# search finds, not how vectors are computed (tests/test_embeddings.py does, cold), and re-embedding
# the same PDF on every run is most of this file's time.
pytestmark = pytest.mark.usefixtures("lite_vector_settings", "warm_embedding_cache")


def ingest(scope, kb, path, name=None):
    with open(path, "rb") as fh:
        upload = ingest_document(scope, kb, fh, name or path.name)
    return run_inline(upload.document.pk)


def ingest_one_story_in_two_languages(scope, kb, directory):
    """An English file and a Chinese one telling the same facts: the cross-language shift's fixture."""
    english = directory / "station.txt"
    english.write_text("Aurora Station is a research base on the southern ice shelf.\n\n"
                       "Tourist visits ended in March 2017, after a storm wrecked the pier.", encoding="utf-8")
    chinese = directory / "极光站.txt"
    chinese.write_text("极光站是南部冰架上的一个科研基地。\n\n2017年3月，一场风暴摧毁了码头，游客参观从此结束。",
                       encoding="utf-8")
    for path in (english, chinese):
        assert ingest(scope, kb, path).status == "ready"


def index_count(document, pk=None):
    flt = IndexFilter(tenant_id=document.kb.tenant_id, kb_ids=(document.kb_id,), document_ids=(pk or document.pk,),
                      statuses=())
    return vector_index().count(flt), keyword_index().count(flt)


def find(scope, query, method="hybrid", **extra):
    return search(scope, parse_search_request({"query": query, "method": method, **extra}))


@pytest.fixture
def alice_scope(world):
    return permitted_scope(world.alice, write=True)


def test_a_text_pdf_becomes_chunks_episodes_and_facts_found_with_their_page(world, alice_scope):
    doc = ingest(alice_scope, world.docs, DOCS / "language-docs" / "fr_olap.pdf")
    assert doc.status == "ready", doc.error
    assert doc.detected_type == "pdf" and doc.page_count == 12 and doc.progress == 100
    children = Chunk.objects.filter(document=doc, level="child")
    assert children.count() == doc.chunk_count > 10
    assert all(c.page for c in children) and all(c.section_path for c in children)
    assert doc.episode_count == Chunk.objects.filter(document=doc, level="parent").count()
    facts = Memory.objects.filter(document=doc, kind="atomic_fact")
    assert facts.count() == doc.fact_count > doc.episode_count
    assert all(f.parent.kind == "episode" and f.source_chunks.exists() for f in facts[:50])
    # every chunk and every memory is in both indexes
    assert index_count(doc) == (doc.chunk_count + doc.episode_count + doc.fact_count,) * 2

    response = find(alice_scope, "langage QSL définitions préliminaires")
    hits = response["facts"] + response["episodes"]
    assert hits, response
    source = hits[0]["sources"][0]
    assert source["document_id"] == doc.pk and source["page"] >= 1 and source["section_path"]


def test_every_format_family_is_ingested_with_its_structure(world, alice_scope):
    cases = {
        "fake.docx": lambda d: d.detected_type == "docx",
        "fake-power-point.pptx": lambda d: Chunk.objects.filter(document=d, slide=1).exists(),
        "stanley-cups.xlsx": lambda d: Chunk.objects.filter(document=d).exclude(sheet="").exists(),
        "fake-email-attachment.eml": lambda d: any(
            "attachment_of" in c.metadata for c in Chunk.objects.filter(document=d, level="parent")),
        "stanley-cups.csv": lambda d: "Stanley" in Chunk.objects.filter(document=d).first().text,
        "fake-html.html": lambda d: d.detected_type == "html",
        "README.md": lambda d: any(c.section_path for c in Chunk.objects.filter(document=d)),
    }
    for name, check in cases.items():
        path = DOCS / name if (DOCS / name).exists() else DOCS / "eml" / name
        doc = ingest(alice_scope, world.docs, path)
        assert doc.status == "ready", (name, doc.error)
        assert doc.chunk_count and doc.episode_count, name
        assert check(doc), name
    vtt = next((SHARED_DATA / "docs" / "vtt" / "videojs-elephantsdream").glob("*.vtt"))
    doc = ingest(alice_scope, world.docs, vtt)
    assert doc.status == "ready", doc.error
    timed = Chunk.objects.filter(document=doc, level="child").exclude(start_time=None)
    assert timed.count() == doc.chunk_count and all(c.end_time >= c.start_time for c in timed)


def test_running_a_document_twice_does_not_duplicate_anything(world, alice_scope):
    doc = ingest(alice_scope, world.docs, DOCS / "fake-html.html")
    before = (doc.chunk_count, doc.episode_count, doc.fact_count, index_count(doc))
    memory_ids = set(Memory.objects.filter(document=doc).values_list("id", flat=True))
    rerun_document(alice_scope, doc)
    doc = run_inline(doc.pk)
    assert doc.status == "ready"
    assert (doc.chunk_count, doc.episode_count, doc.fact_count, index_count(doc)) == before
    assert set(Memory.objects.filter(document=doc).values_list("id", flat=True)) == memory_ids


def test_deleting_a_document_removes_it_from_the_database_and_both_indexes(world, alice_scope,
                                                                         django_capture_on_commit_callbacks):
    doc = ingest(alice_scope, world.docs, DOCS / "fake-html.html")
    assert index_count(doc) != (0, 0)
    stored, pk = doc.original.path, doc.pk
    with django_capture_on_commit_callbacks(execute=True):
        delete_document(alice_scope, doc)
    assert not Document.objects.filter(pk=pk).exists()
    assert not Memory.objects.filter(document_id=pk).exists()
    assert index_count(doc, pk) == (0, 0)
    assert not shutil.os.path.exists(stored)


def test_reconcile_rewrites_a_lost_keyword_index_without_embedding_again(world, alice_scope, monkeypatch):
    def found():  # the table's memories say "Cell": a stemmed query finds them
        response = find(alice_scope, "cells", method="keyword")
        return response["episodes"] + response["facts"]

    doc = ingest(alice_scope, world.docs, DOCS / "fake-html.html")
    rows = index_count(doc)
    assert found()
    keyword_index().drop_all()  # what a new keyword analysis looks like: its index is empty
    assert index_count(doc) == (rows[0], 0) and found() == []
    report = reconcile(world.acme)
    assert report["keyword"]["missing"] == report["expected"] >= rows[1] and report["vector"]["missing"] == 0

    def no_embedding():
        raise AssertionError("a keyword-only repair must not embed")

    monkeypatch.setattr("retrieval.projection.writes.embedder", no_embedding)
    assert reconcile(world.acme, repair=True)["repaired"]
    assert index_count(doc) == rows and found()
    assert reconcile(world.acme)["keyword"]["missing"] == 0

    keyword_index().drop_all()  # `manage.py up` does the same by itself for every tenant
    assert refill_empty_keyword_index() == report["expected"] and index_count(doc) == rows and found()
    assert refill_empty_keyword_index() == 0  # not empty now: nothing is written twice


def _zip_bomb(path):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>')
        z.writestr("word/document.xml", b"\0" * (300 * 1024 * 1024))


def test_bad_files_fail_with_a_reason_and_lose_nothing(world, alice_scope, tmp_path, settings):
    settings.LOCI_MAX_UPLOAD_BYTES = 2 * 1024 * 1024
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes((DOCS / "pdf" / "fake-memo.pdf").read_bytes()[:3000])
    empty = tmp_path / "zero.txt"
    empty.write_bytes(b"")
    bomb = tmp_path / "bomb.docx"
    _zip_bomb(bomb)
    huge = tmp_path / "huge.txt"
    huge.write_bytes(b"big text. " * 300_000)
    mislabelled = tmp_path / "photo.pdf"
    mislabelled.write_bytes((DOCS / "fake-html.html").read_bytes())
    expectations = {
        DOCS / "pdf" / "password.pdf": "password",
        DOCS / "empty.txt": "empty",
        empty: "empty",
        truncated: "damaged",
        bomb: "",
        huge: "limit",
        DOCS / "fake-encrypted.msg": "",
    }
    docs = {path: ingest(alice_scope, world.docs, path) for path in expectations}
    good = ingest(alice_scope, world.docs, mislabelled)  # HTML named .pdf: parsed by content
    assert good.status == "ready" and good.detected_type == "html", good.error
    for path, words in expectations.items():
        doc = docs[path]
        if path == empty:  # same bytes as empty.txt: reported as a duplicate of it
            continue
        assert doc.status == "failed", path
        assert doc.error and words.lower() in doc.error.lower(), (path, doc.error)
        assert "Traceback" not in doc.error
        assert doc.original.size == path.stat().st_size  # the original is kept


def test_no_method_ever_returns_another_tenants_rows(world, alice_scope):
    ingest(alice_scope, world.docs, DOCS / "fake-html.html")
    charlie = permitted_scope(world.charlie, write=True)
    ingest(charlie, world.secret, DOCS / "fake-html.html")
    secret_docs = set(Document.objects.filter(kb=world.secret).values_list("pk", flat=True))
    for method in ("keyword", "vector", "hybrid", "agentic"):
        for filters in ({}, {"user_id": 'x" or tenant_id > 0 or "'}, {"session_id": "') OR 1=1 --"}):
            response = find(alice_scope, "the cow and its worn hooves", method=method, filters=filters,
                            memory_types=["episode", "atomic_fact", "chunk"])
            items = response["facts"] + response["episodes"] + response["chunks"]
            items += [f for e in response["episodes"] for f in e["atomic_facts"]]
            cited = {s.get("document_id") for it in items for s in it["sources"]}
            assert not cited & secret_docs, (method, filters)
            if not filters:
                assert items, method  # alice does find her own copy
            else:
                assert not items  # hostile values match nothing rather than everything



def test_hybrid_scores_what_the_recall_leaves_in_one_vector_search(world, alice_scope, monkeypatch):
    """Stage 3 (the facts of the recalled episodes) and the scores the recall lists left out come
    from one vector search together; answers are the same as with a search for each."""
    from retrieval.search import hybrid

    ingest(alice_scope, world.docs, DOCS / "language-docs" / "fr_olap.pdf")
    index, calls = vector_index(), []
    monkeypatch.setattr(index, "search", lambda *a, _search=index.search, **kw: calls.append(a[1]) or _search(*a, **kw))
    query = {"query": "définitions préliminaires du langage", "top_k": 5}

    merged = find(alice_scope, **query)
    assert len(calls) == 3  # episode recall, fact recall, then everything else
    assert calls[2].or_ids or calls[2].parent_ids

    calls.clear()
    monkeypatch.setattr(hybrid, "prefetch_recalled", lambda *a: None)  # one search for each need, as before
    separate = find(alice_scope, **query)
    assert len(calls) > 3
    assert merged["facts"] and [(f["id"], f["score"]) for f in merged["facts"]] == [
        (f["id"], f["score"]) for f in separate["facts"]]
    assert [(e["id"], e["score"]) for e in merged["episodes"]] == [(e["id"], e["score"]) for e in separate["episodes"]]


def test_a_documents_facts_are_found_by_its_title_though_they_do_not_repeat_it(world, alice_scope, tmp_path):
    """A sentence often leaves its subject to the document's title; its fact is indexed under it."""
    path = tmp_path / "Aurora Station.txt"
    path.write_text("Aurora Station is a research base on the southern ice shelf, run by a consortium of universities.\n\n"
                    "Tourist visits ended in March 2017, after a storm wrecked the pier.\n\n"
                    "Researchers still winter over every year to measure the ice.", encoding="utf-8")
    doc = ingest(alice_scope, world.docs, path)
    assert doc.status == "ready", doc.error
    response = find(alice_scope, "Aurora", method="keyword", memory_types=["atomic_fact"], top_k=10)
    found = [f["atomic_fact"] for e in response["episodes"] for f in e["atomic_facts"]]
    assert any(text.startswith("Tourist visits ended in March 2017") for text in found), found  # shown as written
    hybrid = find(alice_scope, "When did Aurora Station stop tourist visits?", top_k=3)
    assert hybrid["facts"][0]["atomic_fact"].startswith("Tourist visits ended in March 2017")

def test_chunks_are_searchable_with_context(world, alice_scope):
    doc = ingest(alice_scope, world.docs, DOCS / "stanley-cups.csv")
    response = find(alice_scope, "Stanley Cup", memory_types=["chunk"], expand_context=True)
    assert response["chunks"] and response["chunks"][0]["sources"][0]["document_id"] == doc.pk
    assert response["chunks"][0]["context"]["text"]


def test_neighbours_bring_the_chunks_around_a_hit_in_reading_order(world, alice_scope):
    doc = ingest(alice_scope, world.docs, DOCS / "language-docs" / "fr_olap.pdf")
    children = list(doc.chunks.filter(level="child").order_by("ordinal"))
    assert len(children) >= 3
    response = find(alice_scope, children[1].text[:200], memory_types=["chunk"], neighbours=1, top_k=3)
    hit = response["chunks"][0]
    ordinal = next(c.ordinal for c in children if c.pk == hit["id"])
    around = hit["context"]["neighbours"]
    assert [n["offset"] for n in around] == [o for o in (-1, 1) if 0 <= ordinal + o < len(children)]
    assert [n["text"] for n in around] == [c.text for c in children if abs(c.ordinal - ordinal) == 1]
    assert hit["context"]["text"]  # neighbours imply context expansion: the parent chunk is there too
    assert all(n["page"] for n in around)  # each neighbour says where it is
    facts = find(alice_scope, children[1].text[:200], neighbours=2, top_k=3)["facts"]
    assert facts and all("neighbours" in f["context"] for f in facts)


def test_neighbours_out_of_range_is_a_clear_error():
    from retrieval.request import SearchError

    for bad in (-1, 6, "2", True):
        with pytest.raises(SearchError, match="neighbours"):
            parse_search_request({"query": "x", "neighbours": bad})


def test_hybrid_answers_across_languages_are_the_same_with_the_texts_read_ahead(world, alice_scope, monkeypatch,
                                                                                tmp_path):
    """Hybrid reads the recalled episodes' and facts' texts (for the cross-language shift) while the
    prefetch's engine calls run; the answers equal those of reading each text when it is scored."""
    from retrieval.search import hybrid

    ingest_one_story_in_two_languages(alice_scope, world.docs, tmp_path)
    shifted = []
    for query in ("极光站的游客参观什么时候结束？", "When did tourist visits to Aurora Station end?"):
        ahead = find(alice_scope, query, top_k=5)
        monkeypatch.setattr(hybrid.CosineShifts, "preload", lambda self, ids: None)
        when_scored = find(alice_scope, query, top_k=5)
        monkeypatch.undo()
        assert ahead["facts"] and [(f["id"], f["score"], f["scores"]) for f in ahead["facts"]] == [
            (f["id"], f["score"], f["scores"]) for f in when_scored["facts"]]
        assert [(e["id"], e["score"]) for e in ahead["episodes"]] == [(e["id"], e["score"]) for e in when_scored["episodes"]]
        shifted += [f for f in ahead["facts"] if "cross_language" in f["scores"]]
    assert shifted  # the shift did apply, to the other language's facts
