"""The web console with Django's test client: every page renders, and it enforces the API's permissions."""

import datetime

import pytest
from django.core.files.base import ContentFile
from django.test import Client
from django.utils import timezone

from memory.models import Chunk, Document, Memory
from retrieval.highlight import highlight, query_terms
from tenants.models import KnowledgeBase, Membership, Role
from tests.index_fixtures import lite_vector_settings, milvus_lite_uri  # noqa: F401 (fixtures)

PAGES = ["/", "/kbs/new/", "/kbs/docs/edit/", "/kbs/docs/delete/", "/upload/", "/documents/", "/memories/",
         "/memories/?kind=atomic_fact", "/search/"]


def client_for(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def make_document(kb, name="memo.pdf", *, status=Document.Status.READY, detected_type="pdf", parents=1,
                  content=b"%PDF-1.4 fake"):
    doc = Document(kb=kb, filename=name, sha256=f"{name}-{kb.pk}".encode().hex()[:64].ljust(64, "0"),
                   size=len(content), detected_type=detected_type, status=status,
                   progress=100 if status == Document.Status.READY else 40, stage=status)
    doc.original.save(name, ContentFile(content), save=False)
    doc.save()
    for i in range(parents):
        parent = Chunk.objects.create(document=doc, level="parent", ordinal=i, text=f"Section {i} text.",
                                      section_path=["Budget", f"Part {i}"], page=i + 1)
        Chunk.objects.create(document=doc, parent=parent, level="child", ordinal=i,
                             text=f"The launch budget for part {i} is 40,000 euros.", page=i + 1)
        child = Chunk.objects.get(document=doc, level="child", ordinal=i)
        episode = Memory.objects.create(tenant=kb.tenant, kb=kb, document=doc, kind="episode", ordinal=i,
                                        text=f"Budget section {i} of {name}.", topic=f"Budget {i}",
                                        metadata={"parent_chunk_id": parent.pk})
        episode.source_chunks.set([parent, child])
        fact = Memory.objects.create(tenant=kb.tenant, kb=kb, document=doc, kind="atomic_fact", parent=episode,
                                     text=f"The launch budget for part {i} is 40,000 euros.",
                                     metadata={"parent_chunk_id": parent.pk})
        fact.source_chunks.set([child])
    doc.chunk_count = doc.episode_count = doc.fact_count = parents
    doc.save()
    return doc


@pytest.fixture
def memo(world):
    return make_document(world.docs, "fake-memo.pdf")


# --- every page, every role -------------------------------------------------------------------------

@pytest.mark.parametrize("path", PAGES + ["/documents/1/", "/documents/status.json?ids=1"])
def test_anonymous_visitors_are_sent_to_sign_in(world, path):
    response = client_for().get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


@pytest.mark.parametrize("path", PAGES)
def test_each_page_renders_for_the_owner(world, memo, path):
    response = client_for(world.alice).get(path)
    assert response.status_code == 200, path
    assert b"Loci" in response.content


def test_sign_in_and_out_with_the_auth_views(world):
    client = Client()
    assert b"Sign in" in client.get("/login/").content
    bad = client.post("/login/", {"username": "alice", "password": "nope"})
    assert bad.status_code == 200 and b"didn\xe2\x80\x99t match" in bad.content
    ok = client.post("/login/", {"username": "alice", "password": "alice-pw-123"})
    assert ok.status_code == 302 and ok["Location"] == "/"
    assert client.get("/").status_code == 200
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_kb_list_shows_counts_and_only_the_callers_tenant(world, memo):
    body = client_for(world.alice).get("/").content.decode()
    assert "Docs" in body and "Notes" in body and "Secret" not in body
    assert "<dt>Documents</dt><dd>1</dd>" in body and "<dt>Memories</dt><dd>2</dd>" in body
    charlie = client_for(world.charlie).get("/").content.decode()
    assert "Secret" in charlie and "Docs" not in charlie


def test_a_user_without_a_tenant_sees_an_explanation(world):
    from django.contrib.auth import get_user_model

    dave = get_user_model().objects.create_user("dave", password="x")
    response = client_for(dave).get("/")
    assert response.status_code == 200 and b"not part of a tenant" in response.content


# --- a viewer reads but cannot write ------------------------------------------------------------------

def test_a_viewer_sees_no_write_buttons(world, memo):
    bob = client_for(world.bob)
    kb_page = bob.get("/").content.decode()
    assert "New knowledge base" not in kb_page and 'href="/upload/"' not in kb_page and "read-only" in kb_page
    doc_page = bob.get(f"/documents/{memo.pk}/").content.decode()
    assert "Download original" in doc_page and "/delete/" not in doc_page and "Re-run" not in doc_page


@pytest.mark.parametrize("method, path", [
    ("get", "/upload/"), ("get", "/kbs/new/"), ("post", "/kbs/new/"), ("get", "/kbs/docs/edit/"),
    ("get", "/kbs/docs/delete/"), ("post", "/kbs/docs/delete/"), ("get", "/documents/{id}/delete/"),
    ("post", "/documents/{id}/delete/"), ("post", "/documents/{id}/rerun/"),
])
def test_a_viewer_is_refused_every_write(world, memo, method, path):
    response = getattr(client_for(world.bob), method)(path.format(id=memo.pk), {"confirm_slug": "docs"})
    assert response.status_code == 403
    assert b"read-only" in response.content
    assert Document.objects.filter(pk=memo.pk).exists() and KnowledgeBase.objects.filter(slug="docs").exists()


def test_a_viewers_upload_through_the_api_is_refused(world):
    client = client_for(world.bob)
    response = client.post("/api/v1/documents", {"kb": "docs", "files": [ContentFile(b"hi", name="a.txt")]})
    assert response.status_code == 403
    assert not Document.objects.exists()


def test_an_editor_may_edit_but_not_create_or_delete_kbs(world):
    Membership.objects.filter(user=world.bob).update(role=Role.EDITOR)
    bob = client_for(world.bob)
    assert bob.get("/kbs/docs/edit/").status_code == 200
    assert bob.get("/kbs/new/").status_code == 403
    assert bob.get("/kbs/docs/delete/").status_code == 403


# --- another tenant's ids are not found -------------------------------------------------------------

@pytest.mark.parametrize("path", ["/documents/{id}/", "/documents/{id}/original/", "/documents/{id}/delete/",
                                  "/kbs/docs/edit/", "/kbs/docs/delete/"])
def test_another_tenants_pages_are_not_found(world, memo, path):
    response = client_for(world.charlie).get(path.format(id=memo.pk))
    assert response.status_code == 404
    assert b"fake-memo" not in response.content


@pytest.mark.parametrize("path", ["/documents/{id}/rerun/", "/documents/{id}/delete/"])
def test_another_tenants_documents_cannot_be_changed(world, memo, path):
    assert client_for(world.charlie).post(path.format(id=memo.pk)).status_code == 404
    assert Document.objects.filter(pk=memo.pk, status="ready").exists()


def test_lists_and_status_show_nothing_of_another_tenant(world, memo):
    charlie = client_for(world.charlie)
    assert b"fake-memo" not in charlie.get("/documents/").content
    assert b"Budget" not in charlie.get("/memories/").content
    assert b"Budget" not in charlie.get("/memories/?kind=atomic_fact").content
    assert charlie.get(f"/documents/status.json?ids={memo.pk}").json() == {"documents": []}


def test_the_switcher_refuses_a_foreign_tenant_or_kb(world):
    charlie = client_for(world.charlie)
    assert charlie.post("/switch/", {"tenant": "acme"}).status_code == 404
    assert charlie.post("/switch/", {"kb": "docs"}).status_code == 404
    assert b"Secret" in charlie.get("/").content


def test_switching_tenant_and_kb_scopes_the_pages(world, memo):
    Membership.objects.create(user=world.alice, tenant=world.globex, role=Role.VIEWER)
    make_document(world.notes, "notes.txt", detected_type="text")
    alice = client_for(world.alice)
    alice.post("/switch/", {"kb": "notes"})
    listing = alice.get("/documents/").content.decode()
    assert "notes.txt" in listing and "fake-memo.pdf" not in listing
    assert alice.post("/switch/", {"tenant": "globex"})["Location"] == "/"
    page = alice.get("/").content.decode()
    assert "Secret" in page and "Notes" not in page and "read-only" in page
    assert alice.get(f"/documents/{memo.pk}/").status_code == 404
    assert alice.get("/upload/").status_code == 403


# --- knowledge bases ------------------------------------------------------------------------------------

def test_owner_creates_and_edits_a_kb(world):
    alice = client_for(world.alice)
    created = alice.post("/kbs/new/", {"name": "常见问题", "slug": "faq", "language": "zh", "description": ""})
    assert created.status_code == 302
    assert KnowledgeBase.objects.get(tenant=world.acme, slug="faq").name == "常见问题"
    clash = alice.post("/kbs/new/", {"name": "Again", "slug": "faq", "language": "auto"})
    assert clash.status_code == 400 and "already exists" in clash.content.decode()
    assert alice.post("/kbs/faq/edit/", {"name": "FAQ", "slug": "faq", "language": "zh"}).status_code == 302
    assert KnowledgeBase.objects.get(tenant=world.acme, slug="faq").name == "FAQ"


def test_kb_delete_summarises_and_needs_the_slug_typed(world, memo):
    alice = client_for(world.alice)
    page = alice.get("/kbs/docs/delete/").content.decode()
    assert "<strong>1</strong> document" in page and "<strong>2</strong> chunks" in page
    assert "<strong>2</strong> memories" in page
    wrong = alice.post("/kbs/docs/delete/", {"confirm_slug": "doc"})
    assert wrong.status_code == 400 and KnowledgeBase.objects.filter(slug="docs").exists()


def test_owner_deletes_a_kb_after_typing_its_slug(world, memo, lite_vector_settings):
    alice = client_for(world.alice)
    alice.post("/switch/", {"kb": "docs"})
    response = alice.post("/kbs/docs/delete/", {"confirm_slug": "docs"}, follow=True)
    assert response.status_code == 200 and "Deleted knowledge base “Docs”" in response.content.decode()
    assert not KnowledgeBase.objects.filter(tenant=world.acme, slug="docs").exists()
    assert not Document.objects.exists() and not Memory.objects.exists()
    assert "Notes" in response.content.decode()  # the switcher forgot the deleted KB


def test_owner_deletes_a_document(world, memo, lite_vector_settings):
    alice = client_for(world.alice)
    confirm = alice.get(f"/documents/{memo.pk}/delete/").content.decode()
    assert "<strong>2</strong> chunks" in confirm and "<strong>2</strong> memories" in confirm
    response = alice.post(f"/documents/{memo.pk}/delete/", follow=True)
    assert "Deleted “fake-memo.pdf”" in response.content.decode()
    assert not Document.objects.filter(pk=memo.pk).exists() and not Memory.objects.exists()


# --- documents ------------------------------------------------------------------------------------------

def test_document_list_filters_and_paginates(world, memo):
    make_document(world.docs, "failed.docx", status=Document.Status.FAILED, detected_type="docx", parents=0)
    old = make_document(world.docs, "old.txt", detected_type="text", parents=0)
    Document.objects.filter(pk=old.pk).update(created_at=timezone.now() - datetime.timedelta(days=30))
    alice = client_for(world.alice)

    def names(query):
        return [d.filename for d in alice.get("/documents/" + query).context["page"].object_list]

    assert sorted(names("")) == ["failed.docx", "fake-memo.pdf", "old.txt"]
    assert names("?status=failed") == ["failed.docx"]
    assert names("?type=pdf") == ["fake-memo.pdf"]
    assert names("?q=MEMO") == ["fake-memo.pdf"]
    since = (timezone.now() - datetime.timedelta(days=1)).date().isoformat()
    assert sorted(names(f"?from={since}")) == ["failed.docx", "fake-memo.pdf"]
    assert names("?kb=notes") == []
    assert b"No documents match" in alice.get("/documents/?kb=notes").content
    for i in range(26):
        make_document(world.notes, f"n{i}.txt", parents=0)
    page2 = alice.get("/documents/?kb=notes&page=2")
    assert len(page2.context["page"].object_list) == 1 and b"Page 2 of 2" in page2.content


def test_document_list_has_an_empty_state(world):
    body = client_for(world.alice).get("/documents/").content.decode()
    assert "No documents yet" in body and "Upload documents" in body


def test_document_page_shows_structure_anchors_and_memories(world, memo):
    body = client_for(world.alice).get(f"/documents/{memo.pk}/").content.decode()
    child = memo.chunks.get(level="child")
    assert f'id="chunk-{child.pk}"' in body and f'id="chunk-{child.parent_id}"' in body
    assert "Budget › Part 0" in body and "p. 1" in body
    assert "Budget section 0 of fake-memo.pdf." in body and "40,000 euros" in body
    assert f"/documents/{memo.pk}/original/" in body


def test_a_chunk_link_opens_the_page_that_holds_it(world, monkeypatch):
    monkeypatch.setattr("console.documents.PARENTS_PER_PAGE", 2)
    doc = make_document(world.docs, "long.pdf", parents=5)
    last = doc.chunks.get(level="child", ordinal=4)
    response = client_for(world.alice).get(f"/documents/{doc.pk}/?chunk={last.pk}")
    assert response.context["page"].number == 3
    assert f'id="chunk-{last.pk}"' in response.content.decode()


def test_a_processing_document_shows_its_stage(world):
    doc = make_document(world.docs, "busy.pdf", status=Document.Status.EXTRACTING, parents=0)
    body = client_for(world.alice).get(f"/documents/{doc.pk}/").content.decode()
    assert "data-reload-on-finish" in body and "Not parsed yet" in body and 'class="current">extracting' in body


def test_a_failed_document_shows_its_reason_and_a_retry(world, django_capture_on_commit_callbacks):
    doc = make_document(world.docs, "broken.pdf", status=Document.Status.FAILED, parents=0)
    Document.objects.filter(pk=doc.pk).update(error="The PDF is encrypted.")
    alice = client_for(world.alice)
    body = alice.get(f"/documents/{doc.pk}/").content.decode()
    assert "The PDF is encrypted." in body and "Retry" in body
    with django_capture_on_commit_callbacks(execute=False):
        assert alice.post(f"/documents/{doc.pk}/rerun/").status_code == 302
    doc.refresh_from_db()
    assert doc.status == "queued" and doc.error == ""


def test_the_original_downloads(world, memo):
    response = client_for(world.alice).get(f"/documents/{memo.pk}/original/")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"%PDF-1.4 fake"
    assert 'filename="fake-memo.pdf"' in response["Content-Disposition"]


def test_status_json_reports_progress(world, memo):
    busy = make_document(world.docs, "busy.pdf", status=Document.Status.PARSING, parents=0)
    alice = client_for(world.alice)
    body = alice.get(f"/documents/status.json?ids={memo.pk},{busy.pk},999999").json()
    by_id = {d["id"]: d for d in body["documents"]}
    assert set(by_id) == {memo.pk, busy.pk}
    assert by_id[busy.pk]["status"] == "parsing" and by_id[busy.pk]["finished"] is False
    assert by_id[memo.pk]["finished"] is True and by_id[memo.pk]["url"] == f"/documents/{memo.pk}/"
    assert alice.get("/documents/status.json?ids=a,b").status_code == 400


def test_the_upload_page_targets_the_api_with_the_tenant(world):
    body = client_for(world.alice).get("/upload/").content.decode()
    assert 'data-tenant="acme"' in body and 'data-api="/api/v1/documents"' in body and "webkitdirectory" in body
    assert '<option value="docs"' in body and '<option value="notes"' in body


# --- memories -------------------------------------------------------------------------------------------

def test_memories_browse_by_kind_and_filter(world, memo):
    make_document(world.notes, "other.txt", parents=1)
    Memory.objects.filter(kind="atomic_fact", kb=world.notes).update(status="disabled")
    alice = client_for(world.alice)

    def texts(query):
        return [m.text for m in alice.get("/memories/" + query).context["page"].object_list]

    assert sorted(texts("")) == ["Budget section 0 of fake-memo.pdf.", "Budget section 0 of other.txt."]
    assert texts("?kind=atomic_fact") == ["The launch budget for part 0 is 40,000 euros."]
    assert len(texts("?kind=atomic_fact&status=all")) == 2
    assert texts("?kind=atomic_fact&status=disabled&kb=notes") == ["The launch budget for part 0 is 40,000 euros."]
    assert texts("?q=other.txt") == ["Budget section 0 of other.txt."]
    assert b"No memories match" in alice.get("/memories/?q=nothing-like-this").content


def test_admin_links_are_shown_only_to_staff(world, memo):
    assert b"/admin/memory/memory/" not in client_for(world.alice).get("/memories/").content
    world.alice.is_staff = world.alice.is_superuser = True
    world.alice.save()
    assert b"/admin/memory/memory/" in client_for(world.alice).get("/memories/").content


# --- search ---------------------------------------------------------------------------------------------

def test_search_page_starts_with_an_explanation(world):
    body = client_for(world.alice).get("/search/").content.decode()
    assert "Ask a question" in body and 'value="agentic"' in body


@pytest.mark.parametrize("query, message", [
    ("q=budget&top_k=abc", "top_k"),
    ("q=budget&top_k=500", "top_k"),
    ("q=budget&method=magic", "Unknown method"),
    ("q=budget&kb=secret", "Unknown knowledge base"),
])
def test_search_errors_are_shown_as_400(world, query, message):
    response = client_for(world.alice).get("/search/?" + query)
    assert response.status_code == 400
    assert message in response.content.decode() and "This search can’t run" in response.content.decode()


def test_query_terms_and_highlighting_escape_first():
    terms = query_terms("What is the <b>launch</b> budget?")
    assert terms == ["budget", "launch"]
    html = highlight("<script>alert(1)</script> The launch budgets & more", terms)
    assert html == ("&lt;script&gt;alert(1)&lt;/script&gt; The <mark>launch</mark> "
                    "<mark>budgets</mark> &amp; more")


def test_chinese_queries_are_highlighted_with_jieba_tokens():
    terms = query_terms("项目预算是多少")
    assert "预算" in terms and "项目" in terms
    assert str(highlight("本项目的预算为四万欧元。", terms)) == "本<mark>项目</mark>的<mark>预算</mark>为四万欧元。"
    assert str(highlight("项目预算", terms)) == "<mark>项目预算</mark>"  # adjacent terms share one mark


def test_keyword_search_renders_highlighted_results_with_sources(world, memo):
    from retrieval.backends import keyword_index
    from retrieval.projection import row_for_memory

    keyword_index().upsert([row_for_memory(m) for m in Memory.objects.all()])
    response = client_for(world.alice).get("/search/?q=launch+budget&method=keyword&top_k=5")
    assert response.status_code == 200
    body = response.content.decode()
    child = memo.chunks.get(level="child")
    assert "<mark>launch</mark> <mark>budget</mark> for part 0" in body
    assert f'href="/documents/{memo.pk}/?chunk={child.pk}#chunk-{child.pk}"' in body
    assert "fake-memo.pdf" in body and "p. 1" in body and ">bm25<" in body and " ms</strong>" in body
    # The other tenant's search over the same index finds nothing of acme's.
    other = client_for(world.charlie).get("/search/?q=launch+budget&method=keyword")
    assert other.status_code == 200 and "No results for" in other.content.decode()
    assert "fake-memo" not in other.content.decode()


def test_the_memory_page_lists_agent_cases_and_skills(world):
    common = dict(tenant=world.acme, kb=world.docs, user_id="u1", agent_id="travel-bot")
    Memory.objects.create(kind="agent_case", text="Agent case: book a hotel in Lisbon", **common, metadata={
        "task": "Book a hotel in Lisbon", "steps": [{"text": "search_hotels(Lisbon) -> ok"}],
        "outcome": "Booked Hotel Avenida.", "outcome_label": "success", "quality": 0.8})
    Memory.objects.create(kind="agent_skill", text="Agent skill: book a hotel", **common, metadata={
        "name": "Book a hotel room", "steps": ["search_hotels(city)", "reserve_room(hotel)"], "maturity": 0.75,
        "successes": 2, "case_ids": ["a", "b"], "pitfalls": ["reserve_room: no availability"]})
    client = client_for(world.alice)
    cases = client.get("/memories/?kind=agent_case").content.decode()
    assert "Book a hotel in Lisbon" in cases and "search_hotels(Lisbon) -&gt; ok" in cases
    assert "success · quality 0.8" in cases and "agent travel-bot" in cases
    skills = client.get("/memories/?kind=agent_skill&agent_id=travel-bot").content.decode()
    assert "Book a hotel room" in skills and "maturity 0.75" in skills and "no availability" in skills
    assert "Book a hotel room" not in client.get("/memories/?kind=agent_skill&agent_id=other").content.decode()


def test_search_filters_by_agent_and_metadata(world, memo):
    from retrieval.backends import keyword_index
    from retrieval.projection import row_for_memory

    fact = Memory.objects.filter(kind="atomic_fact").first()
    Memory.objects.filter(pk=fact.pk).update(agent_id="planner", user_metadata={"category": "budget"})
    keyword_index().upsert([row_for_memory(m) for m in Memory.objects.all()])
    client = client_for(world.alice)

    def found(extra: str) -> bool:
        response = client.get("/search/?q=launch+budget&method=keyword&top_k=50&chunks=&" + extra)
        assert response.status_code == 200, response.content.decode()[-500:]
        return fact.text.split()[0] in response.content.decode() and str(fact.pk) in response.content.decode()

    assert not found("")  # no agent named: the planner's memory is not shown
    assert found("agent_id=planner") and found("agent_id=*&metadata=%7B%22category%22%3A%22budget%22%7D")
    assert not found("agent_id=planner&metadata=%7B%22category%22%3A%22other%22%7D")
    bad = client.get("/search/?q=budget&metadata=%7Bnope")
    assert bad.status_code == 400 and "must be a JSON object" in bad.content.decode()


def test_a_backend_failure_is_shown_as_unavailable(world, monkeypatch):
    def down(scope, request):
        raise ConnectionError("the vector index did not answer")

    monkeypatch.setattr("console.search.search", down)
    response = client_for(world.alice).get("/search/?q=budget")
    assert response.status_code == 503
    assert "Search is unavailable right now" in response.content.decode()
