"""Deleted means deleted: every delete path of every scope leaves no row in either index, in either place.

Each scope (memory, document, knowledge base, tenant, a conversation user, one session) is deleted
through every entry point that offers it (REST API, console, Django admin one and "delete
selected", `manage.py delete`), on the real embedded indexes (Milvus Lite, SQLite FTS5). After the
delete: no row of it in either index, in the shared or the exclusive place; `reconcile` reports
nothing stale or missing; keyword, vector and hybrid search return nothing of it. Search alone could
not show a leak (results are read back from the database, so a stale row is dropped there), hence
the index counts. Also: a document deleted while its index stage runs, at several points of it, and
a tenant switched between shared and exclusive isolation.
"""

import io
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pytest
from django.core.management import call_command
from django.db import transaction
from django.test import Client

from ingest.actions import ingest_document
from conversations.actions import accumulate_messages, flush_session
from ingest.tasks import run_inline
from memory.models import Chunk, Document, Memory, Message
from retrieval import projection
from retrieval.backends import token_vectors
from retrieval.projection import writes
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter
from retrieval.projection import reconcile, reconcile_removed
from retrieval.request import parse_search_request
from retrieval.search import search
from tenants.access import Scope, permitted_scope
from tenants.models import KnowledgeBase, Tenant
from tests.conftest import api_client

pytestmark = pytest.mark.usefixtures("lite_vector_settings")

DOC_TEXT = ("Aurora report\n\nThe aurora borealis glowed green over Tromsø harbour on Tuesday night. "
            "The ferry to Senja was delayed by the storm.\n")
CHAT = {  # (user, session): turns
    ("u1", "s1"): [("Mel", "I adopted a tortoise named Sheldon last spring."), ("Ann", "Sheldon the tortoise, lovely!")],
    ("u1", "s2"): [("Mel", "My cello teacher moved to Lisbon in March."), ("Ann", "Lisbon is far for cello lessons.")],
    ("u2", "s1"): [("Bo", "Our greenhouse grows saffron crocus bulbs now."), ("Cy", "Saffron from a greenhouse!")],
}
QUERIES = {"document": "aurora borealis Tromsø ferry", "kb": "aurora borealis Tromsø", "memory": "aurora borealis",
           "tenant": "aurora tortoise cello saffron", "user": "tortoise Sheldon cello Lisbon",
           "session": "tortoise Sheldon"}
METHODS = ("keyword", "vector", "hybrid")


@dataclass
class Seeded:
    tenant: Tenant
    document: Document
    scope: Scope
    other: Document  # globex's document: no delete in acme may touch it
    kbs: dict = field(default_factory=dict)


def ingest_text(scope, kb, text, name):
    upload = ingest_document(scope, kb, io.BytesIO(text.encode()), name)
    document = run_inline(upload.document.pk)
    assert document.status == "ready", document.error
    return document


def chat(scope, kb, committed):
    for (user, session), turns in CHAT.items():
        messages = [{"message_id": f"{session}-{i}", "sender_id": who.lower(), "sender_name": who, "content": text,
                     "timestamp": datetime(2024, 3, i + 1, 10, tzinfo=timezone.utc)} for i, (who, text) in enumerate(turns)]
        committed(accumulate_messages, scope, kb, user_id=user, session_id=session, messages=messages)
        committed(flush_session, scope, kb, user_id=user, session_id=session)


@pytest.fixture
def seeded(world, committed, settings):
    settings.SEARCH_LATE_INTERACTION = True  # the late-interaction projection is written, and must go too
    scope = permitted_scope(world.alice, write=True)
    document = ingest_text(scope, world.docs, DOC_TEXT, "aurora.txt")
    chat(scope, world.notes, committed)
    other = ingest_text(permitted_scope(world.charlie, write=True), world.secret, DOC_TEXT, "aurora.txt")
    return Seeded(world.acme, document, scope, other, {"docs": world.docs, "notes": world.notes})


# --- what "of it" means, per scope: an index filter over its rows, and the ids search could return

def filters_of(scope_name: str, s: Seeded, target) -> list[IndexFilter]:
    tenant_id, docs, notes = s.tenant.pk, s.kbs["docs"].pk, s.kbs["notes"].pk
    base = {"statuses": ()}
    if scope_name == "document":
        narrow = [dict(kb_ids=(docs,), document_ids=(target,))]
    elif scope_name == "memory":
        narrow = [dict(kb_ids=(docs,), ids=tuple(f"memory:{pk}" for pk in target))]
    elif scope_name == "kb":
        narrow = [dict(kb_ids=(docs,))]
    elif scope_name == "tenant":
        narrow = [dict(kb_ids=(docs, notes))]
    elif scope_name == "user":
        narrow = [dict(kb_ids=(notes,), user_id="u1")]
    else:
        narrow = [dict(kb_ids=(notes,), user_id="u1", session_id="s1")]
    return [IndexFilter(tenant_id=tenant_id, exclusive=e, **base, **n) for n in narrow for e in (False, True)]


def index_rows(flts: list[IndexFilter]) -> dict[str, int]:
    return {"vector": sum(vector_index().count(f) for f in flts),
            "keyword": sum(keyword_index().count(f) for f in flts),
            # one table for both places: count it once
            "late_interaction": sum(token_vectors.count(f) for f in flts if not f.exclusive)}


def doomed_ids(scope_name: str, s: Seeded) -> set[str]:
    """The ids search may answer with (memory uuids, chunk pks) of what is about to be deleted."""
    if scope_name in ("document", "kb", "tenant"):
        docs = Document.objects.filter(kb__tenant=s.tenant) if scope_name == "tenant" else \
            Document.objects.filter(kb=s.kbs["docs"])
        chunks = {str(pk) for pk in Chunk.objects.filter(document__in=docs).values_list("pk", flat=True)}
        memories = Memory.objects.filter(document__in=docs) if scope_name != "tenant" else \
            Memory.objects.filter(tenant=s.tenant)
        return chunks | {str(pk) for pk in memories.values_list("pk", flat=True)}
    if scope_name == "memory":
        episode = Memory.objects.get(document=s.document, kind="episode")
        return {str(episode.pk), *(str(pk) for pk in episode.facts.values_list("pk", flat=True))}
    memories = Memory.objects.filter(kb=s.kbs["notes"], user_id="u1")
    if scope_name == "session":
        memories = memories.filter(session_id="s1")
    return {str(pk) for pk in memories.values_list("pk", flat=True)}


def found_ids(scope: Scope, query: str, method: str) -> set[str]:
    response = search(scope, parse_search_request({"query": query, "method": method, "top_k": 50,
                                                   "memory_types": ["episode", "atomic_fact", "chunk"]}))
    ids = set()

    def walk(value):
        if isinstance(value, dict):
            if "id" in value:
                ids.add(str(value["id"]))
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk({k: response.get(k) for k in ("episodes", "facts", "chunks")})
    return ids


def assert_clean(s: Seeded, scope_name: str, flts, doomed: set[str], search_scope: Scope):
    assert index_rows(flts) == {"vector": 0, "keyword": 0, "late_interaction": 0}
    for method in METHODS:
        assert not found_ids(search_scope, QUERIES[scope_name], method) & doomed, method
    if Tenant.objects.filter(pk=s.tenant.pk).exists():
        report = reconcile(Tenant.objects.get(pk=s.tenant.pk))
        for name in ("vector", "keyword"):
            assert report[name]["stale"] == 0 and report[name]["missing"] == 0, report
        assert report["late_interaction"]["stale"] == report["late_interaction"]["missing"] == 0, report
    removed = reconcile_removed()
    assert removed["vector"]["stale"] == removed["keyword"]["stale"] == 0, removed
    # the other tenant's copy of the same document is untouched
    other = IndexFilter(tenant_id=s.other.kb.tenant_id, kb_ids=(s.other.kb_id,), statuses=())
    assert vector_index().count(other) > 0 and keyword_index().count(other) > 0


# --- the entry points

def staff(world):
    from django.contrib.auth import get_user_model

    User = get_user_model()
    user = User.objects.filter(username="root").first() or User.objects.create_superuser("root", password="root-pw-1")
    client = Client()
    client.force_login(user)
    return client


def _ok(response, *codes):
    assert response.status_code in (codes or (200, 204, 302)), (response.status_code, response.content[:500])


def admin_one(world, model: str, pk):
    _ok(staff(world).post(f"/admin/{model}/{pk}/delete/", {"post": "yes"}), 302)


def admin_bulk(world, model: str, pk):
    _ok(staff(world).post(f"/admin/{model}/", {"action": "delete_selected", "_selected_action": [pk], "post": "yes"}),
        302)


def delete_via(path: str, scope_name: str, s: Seeded, world, target):
    admin_model = {"document": "memory/document", "memory": "memory/memory", "kb": "tenants/knowledgebase",
                   "tenant": "tenants/tenant"}.get(scope_name)
    first = target[0] if isinstance(target, list) else target  # a memory: the episode (its facts go with it)
    admin_pk = {"document": target, "memory": first, "kb": s.kbs["docs"].pk, "tenant": s.tenant.pk}.get(scope_name)
    if path == "admin":
        return admin_one(world, admin_model, admin_pk)
    if path == "admin-bulk":
        return admin_bulk(world, admin_model, admin_pk)
    if path == "command":
        extra = {"document": ["--document", str(target)], "memory": ["--memory", str(first)],
                 "kb": ["--kb", "docs"], "tenant": [], "user": ["--user-id", "u1"],
                 "session": ["--user-id", "u1", "--session-id", "s1"]}[scope_name]
        return call_command("delete", "--tenant", "acme", *extra, "--yes", stdout=io.StringIO())
    if path == "api":
        client = api_client(world.alice_key)
        url = {"document": f"/api/v1/documents/{target}", "memory": f"/api/v1/memories/{first}",
               "kb": "/api/v1/knowledge-bases/docs", "user": "/api/v1/memories?user_id=u1",
               "session": "/api/v1/memories?user_id=u1&session_id=s1"}[scope_name]
        return _ok(client.delete(url), 200, 204)
    assert path == "console"
    client = Client()
    client.force_login(world.alice)
    if scope_name == "document":
        return _ok(client.post(f"/documents/{target}/delete/"), 302)
    return _ok(client.post("/kbs/docs/delete/", {"confirm_slug": "docs"}), 302)


PATHS = [
    ("document", "api"), ("document", "console"), ("document", "admin"), ("document", "admin-bulk"),
    ("document", "command"),
    ("kb", "api"), ("kb", "console"), ("kb", "admin"), ("kb", "admin-bulk"), ("kb", "command"),
    ("memory", "api"), ("memory", "admin"), ("memory", "admin-bulk"), ("memory", "command"),
    ("tenant", "admin"), ("tenant", "admin-bulk"), ("tenant", "command"),
    ("user", "api"), ("user", "command"),
    ("session", "api"), ("session", "command"),
]


@pytest.mark.parametrize("scope_name,path", PATHS, ids=[f"{s}-{p}" for s, p in PATHS])
def test_every_delete_path_leaves_nothing_in_either_index(seeded, world, committed, scope_name, path):
    s = seeded
    if scope_name == "memory":
        episode = Memory.objects.get(document=s.document, kind="episode")
        target = [episode.pk, *episode.facts.values_list("pk", flat=True)]
    else:
        target = s.document.pk
    flts = filters_of(scope_name, s, target)
    before = index_rows(flts)
    # Token vectors are of chat messages (retrieval/backends/token_vectors.py): a document's rows have none.
    assert before["vector"] > 0 and before["keyword"] > 0 and (before["late_interaction"] > 0) == (
        scope_name in ("tenant", "user", "session")), before
    doomed = doomed_ids(scope_name, s)
    assert doomed & found_ids(s.scope, QUERIES[scope_name], "hybrid"), "the search must find it before the delete"
    # A deleted tenant is searched with what its scope was: its id and KB ids go into the index filter.
    old_scope = Scope(Tenant(pk=s.tenant.pk, slug="acme", isolation=s.tenant.isolation), s.scope.kb_ids,
                      False, False, "test")
    committed(delete_via, path, scope_name, s, world, target)
    assert_clean(s, scope_name, flts, doomed, old_scope)


def test_deleting_twice_or_a_half_deleted_document_is_fine(seeded, world, committed):
    """The database delete committed but its index removal never ran (the process died): running it again finishes."""
    from memory.actions import delete_document

    s = seeded
    flts = filters_of("document", s, s.document.pk)
    with transaction.atomic():  # committed without running the on-commit removal
        delete_document(s.scope, s.document)
    assert index_rows(flts)["vector"] > 0
    assert reconcile(s.tenant)["vector"]["stale"] > 0  # the leak is reported
    committed(delete_document, s.scope, s.document)
    committed(delete_document, s.scope, s.document)
    assert_clean(s, "document", flts, set(), s.scope)


def test_a_half_deleted_tenant_is_reported_and_repaired_by_reconcile(seeded, world):
    from memory.actions import delete_tenant

    s = seeded
    flts = filters_of("tenant", s, None)
    with transaction.atomic():  # committed, but the removal after the commit never ran
        delete_tenant(s.tenant, actor="test")
    assert not Tenant.objects.filter(slug="acme").exists()
    report = reconcile_removed()
    assert report["vector"]["stale"] == index_rows(flts)["vector"] > 0 and report["keyword"]["stale"] > 0
    assert reconcile_removed(repair=True)["repaired"]
    assert index_rows(flts) == {"vector": 0, "keyword": 0, "late_interaction": 0}
    assert reconcile_removed()["vector"]["stale"] == 0


# --- a document deleted while its index stage runs

@pytest.mark.parametrize("at_batch", [1, 2, "last"])
def test_a_document_deleted_while_indexing_leaves_no_rows_and_the_stage_stops_quietly(
        seeded, world, committed, monkeypatch, at_batch):
    """The delete commits (and removes rows) between two of the stage's batches, or after its last one."""
    from memory.actions import delete_document
    from ingest.tasks import run_stage

    s = seeded
    monkeypatch.setattr(writes, "EMBED_BATCH", 2)  # a tiny document still takes several batches
    with transaction.atomic():
        upload = ingest_document(s.scope, s.kbs["docs"], io.BytesIO(DOC_TEXT.replace("Tuesday", "Friday").encode()
                                                                      + b"\nSenja ferry timetable changed.\n"), "b.txt")
    pk = upload.document.pk
    assert run_stage(pk, "parse") and run_stage(pk, "extract")
    document = Document.objects.get(pk=pk)
    total = len(projection.document_rows(document))
    batches = -(-total // 2)
    assert batches >= 3, total
    when = batches if at_batch == "last" else at_batch
    real_embedder = writes.embedder
    calls = {"n": 0}

    class DeletingEmbedder:
        """The real embedder; the delete request commits while batch `when` is being embedded."""

        def __init__(self, alias=None, *, build=None):  # projection asks for the embedder of each build it writes
            self.name = real_embedder(build=build).name  # the model, which projection embeds once per batch

        def embed_documents(self, texts):
            calls["n"] += 1
            vectors = real_embedder().embed_documents(texts)
            if calls["n"] == when:
                committed(delete_document, s.scope, Document.objects.select_related("kb__tenant").get(pk=pk))
            return vectors

    monkeypatch.setattr(writes, "embedder", DeletingEmbedder)
    flts = filters_of("document", s, pk)
    assert run_stage(pk, "index") in (True, False)  # no DatabaseError: the stage stops quietly
    assert calls["n"] == when, "the stage stopped at the first batch after the delete"
    assert not Document.objects.filter(pk=pk).exists()
    assert_clean(s, "document", flts, set(), s.scope)


# --- isolation switch

def admin_switch(world, tenant, isolation):
    data = {"slug": tenant.slug, "name": tenant.name, "isolation": isolation}
    kbs = list(KnowledgeBase.objects.filter(tenant=tenant).order_by("pk"))
    prefix = "knowledge_bases"
    data.update({f"{prefix}-TOTAL_FORMS": len(kbs), f"{prefix}-INITIAL_FORMS": len(kbs),
                 f"{prefix}-MIN_NUM_FORMS": 0, f"{prefix}-MAX_NUM_FORMS": 1000})
    for i, kb in enumerate(kbs):
        data.update({f"{prefix}-{i}-id": kb.pk, f"{prefix}-{i}-tenant": tenant.pk, f"{prefix}-{i}-slug": kb.slug,
                     f"{prefix}-{i}-name": kb.name, f"{prefix}-{i}-language": kb.language})
    _ok(staff(world).post(f"/admin/tenants/tenant/{tenant.pk}/change/", data), 302)


def bootstrap_switch(world, tenant, isolation):
    call_command("bootstrap", "--tenant", tenant.slug, "--kb", "docs", "--isolation", isolation, stdout=io.StringIO())


@pytest.mark.parametrize("switch", [admin_switch, bootstrap_switch], ids=["admin", "bootstrap"])
def test_switching_isolation_moves_the_rows_and_leaves_no_copy_behind(seeded, world, committed, switch):
    s = seeded
    kb_ids = (s.kbs["docs"].pk, s.kbs["notes"].pk)

    def rows(exclusive):  # the two places; the late-interaction table is one for both
        counts = index_rows([IndexFilter(tenant_id=s.tenant.pk, kb_ids=kb_ids, exclusive=exclusive, statuses=())])
        return {k: counts[k] for k in ("vector", "keyword")}

    expected = reconcile(s.tenant)["expected"]
    assert rows(False) == {"vector": expected, "keyword": expected} and rows(True) == {"vector": 0, "keyword": 0}
    for isolation, place in (("exclusive", True), ("shared", False)):
        committed(switch, world, Tenant.objects.get(pk=s.tenant.pk), isolation)
        tenant = Tenant.objects.get(pk=s.tenant.pk)
        assert tenant.isolation == isolation
        assert rows(place) == {"vector": expected, "keyword": expected}, isolation
        assert rows(not place) == {"vector": 0, "keyword": 0}, isolation
        report = reconcile(tenant)
        assert all(report[n]["stale"] == report[n]["missing"] == 0 for n in ("vector", "keyword")), report
        scope = permitted_scope(world.alice)
        for method in METHODS:
            assert found_ids(scope, QUERIES["tenant"], method), (isolation, method)


def test_reconcile_reports_and_repairs_rows_left_in_the_old_place(seeded, world):
    """What an isolation switch used to leave: the tenant's copies in the place it no longer reads."""
    s = seeded
    Tenant.objects.filter(pk=s.tenant.pk).update(isolation="exclusive")  # flipped without moving anything
    tenant = Tenant.objects.get(pk=s.tenant.pk)
    report = reconcile(tenant)
    assert report["vector"]["stale"] == report["vector"]["missing"] == report["expected"] > 0
    reconcile(tenant, repair=True)
    report = reconcile(tenant)
    assert all(report[n]["stale"] == report[n]["missing"] == 0 for n in ("vector", "keyword")), report


def test_a_chunk_deleted_in_the_admin_leaves_the_indexes(seeded, world, committed):
    """Deleting a document in the admin lists its chunks; a chunk deleted on its own takes its index row along."""
    s = seeded
    chunk = Chunk.objects.filter(document=s.document, level="child").first()
    flt = [IndexFilter(tenant_id=s.tenant.pk, kb_ids=(s.kbs["docs"].pk,), ids=(f"chunk:{chunk.pk}",), statuses=(),
                       exclusive=e) for e in (False, True)]
    assert index_rows(flt) == {"vector": 1, "keyword": 1, "late_interaction": 0}  # chunks have no token vectors
    committed(admin_bulk, world, "memory/chunk", chunk.pk)
    assert not Chunk.objects.filter(pk=chunk.pk).exists()
    assert index_rows(flt) == {"vector": 0, "keyword": 0, "late_interaction": 0}
    report = reconcile(s.tenant)
    assert report["vector"]["stale"] == report["keyword"]["stale"] == 0, report
    out = io.StringIO()
    call_command("reconcile", stdout=out)  # every tenant and every removed KB: no drift, exit 0


@pytest.mark.parametrize("path", ["admin", "admin-bulk"])
def test_messages_deleted_in_the_admin_take_their_facts_out_of_the_indexes(seeded, world, committed, path):
    s = seeded
    message = Message.objects.get(kb=s.kbs["notes"], user_id="u1", session_id="s1", message_id="s1-0")
    citing = [m for m in Memory.objects.filter(kb=s.kbs["notes"], user_id="u1", session_id="s1")
              if "s1-0" in m.source_message_ids]
    assert citing
    flt = [IndexFilter(tenant_id=s.tenant.pk, kb_ids=(s.kbs["notes"].pk,), statuses=(), exclusive=e,
                       ids=tuple(f"memory:{m.pk}" for m in citing)) for e in (False, True)]
    assert index_rows(flt)["vector"] > 0 and index_rows(flt)["keyword"] > 0
    remover = admin_one if path == "admin" else admin_bulk
    committed(remover, world, "memory/message", message.pk)
    assert not Message.objects.filter(pk=message.pk).exists()
    assert not Memory.objects.filter(pk__in=[m.pk for m in citing]).exists()
    assert index_rows(flt) == {"vector": 0, "keyword": 0, "late_interaction": 0}
    for method in METHODS:
        assert not found_ids(s.scope, "tortoise Sheldon", method) & {str(m.pk) for m in citing}, method
    report = reconcile(s.tenant)
    for name in ("vector", "keyword"):
        assert report[name]["stale"] == 0 and report[name]["missing"] == 0, report
