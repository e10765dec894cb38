"""Lists a request or a large tenant can make longer than a database's parameter limit (issue 30).

SQLite builds before 3.32 allow 999 bound parameters per statement, modern ones 32,766 (Debian's
250,000); PostgreSQL's protocol 65,535. Every ORM `__in` over a long list of values goes to the
database as one parameter (common/sql_in.py), so no list — a tenant's 1,100 knowledge bases, a search's
1,000 document ids, a cluster's cases, a user's memories — meets the limit. The tests lower this
connection's limit to the old 999 and ask for what lists more than that.
"""

import sqlite3
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection

from memory.models import Memory, Message
from tenants.models import KnowledgeBase
from tests.conftest import api_client

pytestmark = pytest.mark.usefixtures("lite_vector_settings")

OLD_LIMIT = 999
T0 = datetime(2024, 6, 3, 10, 0, tzinfo=timezone.utc)
CHAT = ["Ann moved to Lisbon in March and works at the harbour authority.",
        "Her brother Tom visits every summer with his dog Biscuit."]


@pytest.fixture
def old_sqlite(db):
    """This connection's parameter limit as old SQLite builds had it (on PostgreSQL: its own 65,535)."""
    if connection.vendor != "sqlite":
        yield
        return
    connection.ensure_connection()
    raw = connection.connection
    before = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, OLD_LIMIT)
    yield
    raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, before)


@pytest.fixture
def big_tenant(world, committed):
    """acme with 1,100 more knowledge bases, and a conversation remembered in `docs`."""
    KnowledgeBase.objects.bulk_create(KnowledgeBase(tenant=world.acme, slug=f"kb-{i}", name=f"KB {i}")
                                      for i in range(1100))
    client = api_client(world.alice_key)
    turns = [{"message_id": f"m{i}", "role": "user", "sender_name": "Ann", "content": text,
              "timestamp": (T0 + timedelta(minutes=i)).isoformat()} for i, text in enumerate(CHAT)]
    body = {"user_id": "ann", "session_id": "s1", "kb": "docs", "messages": turns}
    assert committed(client.post, "/api/v1/memories", body, format="json").status_code in (200, 201)
    flushed = committed(client.post, "/api/v1/memories/flush", {"user_id": "ann", "session_id": "s1", "kb": "docs"},
                        format="json")
    assert flushed.status_code == 200, flushed.content
    assert Memory.objects.filter(tenant=world.acme, kind=Memory.Kind.ATOMIC_FACT).exists()
    return client


def test_the_limit_is_really_lowered(old_sqlite):
    if connection.vendor != "sqlite":
        pytest.skip("lowered on SQLite only")
    with pytest.raises(Exception, match="too many SQL variables"):
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT 1 WHERE 1 IN ({', '.join(['%s'] * (OLD_LIMIT + 1))})", list(range(OLD_LIMIT + 1)))


@pytest.mark.parametrize("method", ["keyword", "vector", "hybrid", "paths"])
def test_a_search_over_a_tenant_of_1100_knowledge_bases(big_tenant, old_sqlite, method):
    response = big_tenant.post("/api/v1/memories/search", {"query": "Where did Ann move?", "method": method,
                                                           "memory_types": ["episode", "atomic_fact", "foresight",
                                                                            "agent_case"]}, format="json")
    assert response.status_code == 200, response.content[:500]
    body = response.json()
    texts = [item.get("atomic_fact") or item.get("summary") for item in body["facts"] + body["episodes"]]
    assert any("Lisbon" in text for text in texts), body
    assert len(body["query"]["filters_applied"]["kb"]) == 1102


def test_a_search_with_1000_document_ids_over_1100_knowledge_bases(big_tenant, old_sqlite):
    response = big_tenant.post("/api/v1/memories/search", {
        "query": "Where did Ann move?", "filters": {"document_id": list(range(1, 1001))}}, format="json")
    assert response.status_code == 200, response.content[:500]


@pytest.mark.parametrize("path", ["/api/v1/memories?page_size=5", "/api/v1/memories?kb=docs", "/api/v1/entities",
                                  "/api/v1/profiles/ann", "/api/v1/knowledge-bases?page_size=5", "/api/v1/export",
                                  "/api/v1/documents?page_size=5"])
def test_listings_of_a_tenant_of_1100_knowledge_bases(big_tenant, old_sqlite, path):
    response = big_tenant.get(path)
    assert response.status_code in (200, 404), (path, response.status_code, response.content[:500])
    if path == "/api/v1/export":
        assert b"Lisbon" in b"".join(response.streaming_content)


def test_console_pages_of_a_tenant_of_1100_knowledge_bases(world, big_tenant, old_sqlite):
    console = api_client(user=world.alice)
    for path in ("/memories/", "/entities/", "/documents/", "/search/?q=Where+did+Ann+move"):
        response = console.get(path)
        assert response.status_code == 200, (path, response.status_code)


def test_deleting_a_user_with_1500_memories(world, big_tenant, old_sqlite, committed):
    fact = Memory.objects.filter(tenant=world.acme, kind=Memory.Kind.ATOMIC_FACT).first()
    Memory.objects.bulk_create([Memory(tenant=world.acme, kb=fact.kb, kind=Memory.Kind.ATOMIC_FACT, parent=fact.parent,
                                       text=f"Ann noted tide {i}.", user_id="ann", session_id="s1",
                                       content_hash=Memory.hash_text(f"Ann noted tide {i}."))
                                for i in range(1500)], batch_size=100)
    Message.objects.bulk_create([Message(tenant=world.acme, kb=fact.kb, user_id="ann", session_id="s2",
                                         message_id=f"x{i}", role="user", content=f"tide {i}", timestamp=T0)
                                 for i in range(1200)], batch_size=100)
    response = committed(big_tenant.delete, "/api/v1/memories?user_id=ann")
    assert response.status_code in (200, 204), response.content[:500]
    assert not Memory.objects.filter(tenant=world.acme, user_id="ann").exists()
    assert not Message.objects.filter(tenant=world.acme, user_id="ann").exists()


def test_an_in_lookup_over_a_long_list_matches_what_a_short_one_does(world, old_sqlite):
    """Past every limit (70,000 values: over PostgreSQL's 65,535 too), on integer, foreign-key, text and
    UUID columns, in filter and exclude, the answer is that of the short list."""
    kbs = list(KnowledgeBase.objects.filter(tenant=world.acme).values_list("pk", flat=True))
    padding = list(range(10**9, 10**9 + 70_000))
    assert sorted(KnowledgeBase.objects.filter(pk__in=kbs + padding).values_list("pk", flat=True)) == sorted(kbs)
    assert KnowledgeBase.objects.filter(tenant_id__in=[world.acme.pk, *padding]).count() == len(kbs)  # a foreign key
    assert KnowledgeBase.objects.filter(tenant__in=[world.acme.pk, *padding]).count() == len(kbs)
    assert KnowledgeBase.objects.filter(slug__in=["docs", *map(str, padding)]).count() == 1  # text
    assert KnowledgeBase.objects.exclude(pk__in=kbs + padding).filter(tenant=world.acme).count() == 0
    assert KnowledgeBase.objects.filter(pk__in=padding).count() == 0
    memory = Memory.objects.create(tenant=world.acme, kb=world.docs, kind=Memory.Kind.ATOMIC_FACT, text="x",
                                   content_hash=Memory.hash_text("x"))
    others = [uuid.uuid4() for _ in range(5000)]
    assert list(Memory.objects.filter(pk__in=[*others, memory.pk]).values_list("pk", flat=True)) == [memory.pk]
    assert list(Memory.objects.filter(pk__in=[*map(str, others), str(memory.pk)])) == [memory]
