"""Each engine says which of its own errors mean "not now": a stage then waits and retries, and a
document that still fails names the engine. Real errors from real clients (a closed port, a locked
SQLite file, the fake OpenAI server), no module-name guessing."""

import sqlite3

import pytest
from opensearchpy import OpenSearch
from opensearchpy import exceptions as opensearch_errors
from pymilvus.exceptions import MilvusException

from ingest.engine_errors import outage_of
from retrieval.backends import local_servers, transient_engine
from retrieval.backends.milvus import MilvusLiteServer, MilvusVectorIndex
from retrieval.backends.opensearch import OpenSearchKeywordIndex
from retrieval.backends.sqlite_fts import SqliteKeywordIndex
from retrieval.backends.sqlite_vectors import SqliteVectorIndex
from retrieval.embeddings import EmbeddingError
from retrieval.embeddings.openai_compat import OpenAICompatEmbedder
from tests.fake_openai import fake_openai  # noqa: F401
from tests.index_fixtures import free_port

SQLITE = {"vector": "retrieval.backends.sqlite_vectors.SqliteVectorIndex",
          "keyword": "retrieval.backends.sqlite_fts.SqliteKeywordIndex"}


def locked_error(tmp_path) -> sqlite3.OperationalError:
    """What a writer gets when another connection holds the file's write lock past its timeout."""
    path = tmp_path / "locked.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    try:
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        with pytest.raises(sqlite3.OperationalError) as caught:
            other.execute("INSERT INTO t VALUES (1)")
        other.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    return caught.value


def test_a_locked_sqlite_file_is_transient_for_both_embedded_indexes(tmp_path, settings):
    exc = locked_error(tmp_path)
    assert SqliteKeywordIndex.transient(exc) and SqliteVectorIndex.transient(exc)
    assert not SqliteKeywordIndex.transient(sqlite3.OperationalError("no such table: rows"))
    settings.LOCI_VECTOR_INDEX = {"BACKEND": SQLITE["vector"], "OPTIONS": {"path": str(tmp_path / "v.sqlite3")}}
    settings.LOCI_KEYWORD_INDEX = {"BACKEND": SQLITE["keyword"], "OPTIONS": {"path": str(tmp_path / "k.sqlite3")}}
    # Either file may be the locked one: the reason names both rather than guess.
    assert outage_of(RuntimeError("write failed")) is None
    wrapped = RuntimeError("write failed")
    wrapped.__cause__ = exc
    assert outage_of(wrapped).engine == ("The vector index (SqliteVectorIndex) or the keyword index "
                                         "(SqliteKeywordIndex)")


def test_milvus_says_which_of_its_errors_are_transient(settings):
    assert MilvusVectorIndex.transient(MilvusException(code=2, message="Fail connecting to server"))
    assert not MilvusVectorIndex.transient(MilvusException(code=1100, message="cannot parse expression"))
    assert not MilvusVectorIndex.transient(ConnectionRefusedError("not Milvus' own"))
    settings.LOCI_VECTOR_INDEX = {"BACKEND": "retrieval.backends.milvus.MilvusVectorIndex",
                                  "OPTIONS": {"uri": "http://10.0.0.9:19530"}}
    assert transient_engine(MilvusException(code=8, message="rate limit exceeded")) == (
        "The vector index (Milvus at http://10.0.0.9:19530)")


def test_opensearch_unreachable_is_transient_a_bad_request_is_not(settings):
    closed = f"http://127.0.0.1:{free_port()}"
    client = OpenSearch(hosts=[closed], max_retries=0, timeout=2)
    with pytest.raises(opensearch_errors.ConnectionError) as caught:
        client.info()
    assert OpenSearchKeywordIndex.transient(caught.value)
    assert not OpenSearchKeywordIndex.transient(opensearch_errors.RequestError(400, "parsing_exception", {}))
    assert OpenSearchKeywordIndex.transient(opensearch_errors.TransportError(503, "unavailable", {}))
    settings.LOCI_KEYWORD_INDEX = {"BACKEND": "retrieval.backends.opensearch.OpenSearchKeywordIndex",
                                   "OPTIONS": {"url": closed}}
    assert outage_of(caught.value).engine == f"The keyword index (OpenSearch at {closed})"


def test_an_embedding_server_that_does_not_answer_is_transient_a_bad_reply_is_not(fake_openai, settings):
    closed = f"http://127.0.0.1:{free_port()}/v1"
    down = OpenAICompatEmbedder(base_url=closed, model="m", max_retries=0, timeout=2)
    with pytest.raises(EmbeddingError) as caught:
        down.embed_query("hello")
    assert caught.value.transient
    settings.EMBEDDING_BASE_URL = closed
    assert outage_of(caught.value).engine == f"The embedding server ({closed})"

    fake_openai.queue_error("embeddings", 400, "input too long")
    refused = OpenAICompatEmbedder(base_url=fake_openai.base_url, model="m", max_retries=0, timeout=5)
    with pytest.raises(EmbeddingError) as caught:
        refused.embed_query("hello")
    assert not caught.value.transient and outage_of(caught.value) is None


def test_only_a_backend_with_a_local_server_has_one_started_by_up(settings, tmp_path):
    settings.LOCI_VECTOR_INDEX = {"BACKEND": SQLITE["vector"], "OPTIONS": {"path": str(tmp_path / "v.sqlite3")}}
    settings.LOCI_KEYWORD_INDEX = {"BACKEND": SQLITE["keyword"], "OPTIONS": {"path": str(tmp_path / "k.sqlite3")}}
    assert local_servers() == []
    settings.LOCI_VECTOR_INDEX = {"BACKEND": "retrieval.backends.milvus.MilvusVectorIndex",
                                  "OPTIONS": {"lite_path": str(tmp_path / "milvus.db"), "lite_port": 0}}
    [server] = local_servers()
    assert isinstance(server, MilvusLiteServer) and server.path == str(tmp_path / "milvus.db")
    settings.LOCI_VECTOR_INDEX = {"BACKEND": "retrieval.backends.milvus.MilvusVectorIndex",
                                  "OPTIONS": {"uri": "http://10.0.0.9:19530", "lite_path": str(tmp_path / "m.db")}}
    assert local_servers() == []  # a Milvus server elsewhere is not ours to start
