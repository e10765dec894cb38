"""The core's tables are named after their app (memory_document …, not ingest_document …): the rename
(memory/migrations/0005) keeps every row and link, and goes back, on SQLite and on PostgreSQL."""

import pytest

from tests.worker_process import PG_ADMIN_URL, app_env, db_rows, manage, need_service, postgres_database

TABLES = ("document", "chunk", "message", "memory", "memoryhistory", "memory_source_chunks")
# A document with a chunk, a message and a fact citing the chunk (the link table), made through the models.
MAKE_ROWS = """
from django.core.files.base import ContentFile
from memory.models import Chunk, Document, Memory, Message
from tenants.models import KnowledgeBase
kb = KnowledgeBase.objects.get(slug="docs")
doc = Document(kb=kb, filename="a.txt", sha256="0" * 64, size=5)
doc.original.save("a.txt", ContentFile(b"hello"), save=True)
chunk = Chunk.objects.create(document=doc, level="child", ordinal=0, text="hello")
Message.objects.create(tenant_id=kb.tenant_id, kb=kb, user_id="u1", session_id="s1", message_id="m1", role="user",
                       content="hello", timestamp=doc.created_at)
fact = Memory.objects.create(tenant_id=kb.tenant_id, kb=kb, document=doc, kind="atomic_fact", text="hello")
fact.source_chunks.add(chunk)
"""
COUNT_ROWS = """
from memory.models import Chunk, Document, Memory, Message
fact = Memory.objects.get(text="hello")
print(Document.objects.count(), Chunk.objects.count(), Message.objects.count(), fact.source_chunks.count(),
      fact.document.filename)
"""


def tables(url: str, prefix: str) -> set[str]:
    names = [f"{prefix}_{t}" for t in TABLES]
    if url.startswith("sqlite:///"):
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
    else:
        query = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
    return {row[0] for row in db_rows(url, query)} & set(names)


def renamed_both_ways(env: dict, url: str) -> None:
    manage(env, "migrate", "--no-input", "-v", "0")
    manage(env, "bootstrap", "--tenant", "acme", "--kb", "docs")
    manage(env, "shell", "-c", MAKE_ROWS)
    assert len(tables(url, "memory")) == len(TABLES) and not tables(url, "ingest")
    manage(env, "migrate", "memory", "0004", "--no-input", "-v", "0")  # back: the names as they were
    assert len(tables(url, "ingest")) == len(TABLES) and not tables(url, "memory")
    assert db_rows(url, "SELECT filename FROM ingest_document") == [("a.txt",)]
    manage(env, "migrate", "--no-input", "-v", "0")
    assert len(tables(url, "memory")) == len(TABLES) and not tables(url, "ingest")
    counted = manage(env, "shell", "-c", COUNT_ROWS).stdout.strip().splitlines()[-1]  # after the auto-import note
    assert counted.split() == ["1", "1", "1", "1", "a.txt"]
    if url.startswith("sqlite:///"):  # SQLite keeps foreign keys as text: they must name the new tables
        assert db_rows(url, "PRAGMA foreign_key_check") == []
        schema = " ".join(sql for (sql,) in db_rows(url, "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL"))
        # Index names keep their old prefix (a name only); nothing refers to an old table.
        assert 'REFERENCES "ingest_' not in schema and ' ON "ingest_' not in schema


@pytest.mark.slow
def test_the_rename_keeps_rows_and_links_on_sqlite(tmp_path):
    env = app_env(tmp_path)
    renamed_both_ways(env, f"sqlite:///{tmp_path / 'loci.sqlite3'}")


@pytest.mark.slow
def test_the_rename_keeps_rows_and_links_on_postgresql(tmp_path):
    host, port = PG_ADMIN_URL.rsplit("@", 1)[1].split("/", 1)[0].split(":")
    need_service("PostgreSQL", host, int(port))
    with postgres_database() as url:
        renamed_both_ways(app_env(tmp_path, DATABASE_URL=url), url)
