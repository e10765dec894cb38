"""The contract every index backend passes (tests/index_contract.py), one subclass per backend fixture, each
with the tests of its own engine; then the loader of the backends and the embedder contract."""

import random
import threading
import time
from dataclasses import replace

import pytest

from tests.index_contract import GRID_FILTERS, KeywordContract, VectorContract, flt, grid_rows, meta_condition
from tests.index_fixtures import (  # noqa: F401  (fixtures are found by name)
    lite_vector_settings,
    hash_vector,
    make_row,
    milvus_vector_index,
    opensearch_keyword_index,
    reference_match,
    milvus_server,
    server_milvus_index,
    server_milvus_vector_index,
    _server_collections,
    sqlite_keyword_index,
    sqlite_vector_index,
    tantivy_keyword_index,
)


class TestSqliteKeywordIndex(KeywordContract):
    @pytest.fixture
    def index(self, sqlite_keyword_index):
        return sqlite_keyword_index

    def test_filtered_statements_use_the_metadata_indexes(self, index):
        index.upsert([make_row("chunk:1", "alpha", document_id=3)])
        from retrieval.backends.sqlite_fts import build_where, table_names

        where, params = build_where(flt(document_ids=(3,), statuses=()))
        plan = " ".join(r[-1] for r in index._conn().execute(
            f"EXPLAIN QUERY PLAN SELECT count(*) FROM {table_names(None)[0]} AS m WHERE {where}", params))
        assert "USING INDEX" in plan and "SCAN m" not in plan

    def test_an_index_of_an_older_analysis_is_not_searched_and_drop_all_removes_it(self, index):
        import sqlite3

        with sqlite3.connect(index.path) as old:  # generation 1's table set, unstemmed
            old.execute("CREATE TABLE kw_meta (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE)")
            old.execute("CREATE VIRTUAL TABLE kw_fts USING fts5(text_seg)")
            old.execute("INSERT INTO kw_meta VALUES (1, 'chunk:old')")
            old.execute("INSERT INTO kw_fts (rowid, text_seg) VALUES (1, 'dogs')")
        assert index.search("dogs", flt(), 10) == [] and list(index.ids(flt(statuses=()))) == []
        index.drop_all()
        with sqlite3.connect(index.path) as conn:
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert not tables & {"kw_meta", "kw_fts"}

    def test_a_table_made_before_scopes_gains_them_empty_and_filters_on_them(self, index):
        import sqlite3

        from retrieval.backends.sqlite_fts import SqliteKeywordIndex, table_names
        from retrieval.text import segment

        meta, fts = table_names(None)
        with sqlite3.connect(index.path) as old:  # this generation's table set as it was before scopes
            old.execute(f"CREATE TABLE {meta} (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
                        "tenant_id INTEGER NOT NULL, kb_id INTEGER NOT NULL, document_id INTEGER NOT NULL, "
                        "kind TEXT NOT NULL, parent_id TEXT NOT NULL, status TEXT NOT NULL, "
                        "user_id TEXT NOT NULL, session_id TEXT NOT NULL)")
            old.execute(f"CREATE VIRTUAL TABLE {fts} USING fts5(text_seg)")
            old.execute(f"INSERT INTO {meta} VALUES (1, 'memory:old', 1, 1, 0, 'atomic_fact', '', 'active', 'u1', '')")
            old.execute(f"INSERT INTO {fts} (rowid, text_seg) VALUES (1, ?)", (segment("sailing lessons"),))
        fresh = SqliteKeywordIndex({"path": str(index.path)})  # another process, first use after the upgrade
        assert [h.id for h in fresh.search("sailing", flt(agent_id=""), 5)] == ["memory:old"]
        assert fresh.search("sailing", flt(agent_id="bot"), 5) == []
        assert fresh.search("sailing", flt(metadata=(meta_condition("tag", "in", "x"),)), 5) == []
        fresh.upsert([make_row("memory:new", "sailing club", agent_id="bot", metadata={"tag": "x"})])
        assert [h.id for h in fresh.search("sailing", flt(agent_id="bot"), 5)] == ["memory:new"]
        fresh.close()

    def test_several_processes_can_write_one_file(self, index):
        import multiprocessing

        index.upsert([make_row("chunk:warm", "warm")])  # jieba loaded before fork: children start fast
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=_write_rows, args=(str(index.path), p)) for p in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0, 0]
        assert index.count(flt()) == 1 + 3 * 150

    def test_threads_share_the_index(self, index):
        errors = []

        def work(n):
            try:
                index.upsert([make_row(f"chunk:{n}-{i}", "threaded") for i in range(20)])
                index.search("threaded", flt(), 5)
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [] and index.count(flt()) == 80


def _write_rows(path, proc):
    from retrieval.backends.sqlite_fts import SqliteKeywordIndex

    index = SqliteKeywordIndex({"path": path, "timeout": 30})
    for batch in range(15):  # many small transactions, so the processes interleave
        index.upsert([make_row(f"chunk:{proc}-{batch}-{i}", "concurrent write") for i in range(10)])


class TestTantivyKeywordIndex(KeywordContract):
    @pytest.fixture
    def index(self, tantivy_keyword_index):
        return tantivy_keyword_index


class TestOpenSearchKeywordIndex(KeywordContract):
    @pytest.fixture
    def index(self, opensearch_keyword_index):
        return opensearch_keyword_index


class TestSqliteVectorIndex(VectorContract):
    @pytest.fixture
    def index(self, sqlite_vector_index):
        return sqlite_vector_index


class TestSqliteVectorIndexApproximate(VectorContract):
    """The same contract with every search of a partition through its IVF (retrieval/backends/coarse.py)."""

    @pytest.fixture
    def index(self, tmp_path):
        from retrieval.backends.sqlite_vectors import SqliteVectorIndex

        index = SqliteVectorIndex({"path": str(tmp_path / "vectors.sqlite3"), "approximate_rows": 1,
                                   "exact_rows": 0, "approximate_build": "inline"})
        yield index
        index.close()


class TestMilvusLiteVectorIndex(VectorContract):
    @pytest.fixture
    def index(self, milvus_vector_index):
        return milvus_vector_index


class TestServerMilvusVectorIndex(VectorContract):
    """A real Milvus server (MILVUS_URI, else an embedded Milvus 2.3.5 standalone), HNSW as deployed."""

    @pytest.fixture
    def index(self, server_milvus_vector_index):
        return server_milvus_vector_index

    @pytest.fixture(scope="class")
    def partitioned(self, milvus_server):
        """A backend with tenant_id as partition key, holding the grid rows, and one exclusive row."""
        index = server_milvus_index(milvus_server, partition_key=True)
        index.upsert(grid_rows())
        index.upsert([make_row("chunk:x", "alpha", tenant_id=2)], exclusive=True)
        yield index
        index.drop_all()
        index.close()

    def test_scalar_indexes_are_built_on_the_server(self, milvus_server):
        """INVERTED where the server has it (2.4+), the server's default scalar index where not (2.3)."""
        index = server_milvus_index(milvus_server)
        try:
            index.upsert([make_row("chunk:1", "alpha")])
            client, name = index._client(), f"{index.prefix}_64"
            assert sorted(client.list_indexes(name)) == ["document_id", "kb_id", "parent_id", "tenant_id", "vector"]
            assert client.describe_index(name, "vector")["index_type"] == "HNSW"
            # A server-default index (2.3: STL_SORT for ints) is described without an index_type.
            expected = "INVERTED" if milvus_server.version >= (2, 4) else "server default"
            assert client.describe_index(name, "tenant_id").get("index_type", "server default") == expected
        finally:
            index.drop_all()
            index.close()

    def test_partition_key_is_tenant_id_in_shared_collections_only(self, partitioned):
        client = partitioned._client()

        def partition_key(name):
            return [f["name"] for f in client.describe_collection(name)["fields"] if f.get("is_partition_key")]

        assert partition_key(f"{partitioned.prefix}_64") == ["tenant_id"]
        assert partition_key(f"{partitioned.prefix}_t2_64") == []

    def test_partition_key_collections_filter_like_the_others(self, partitioned, milvus_server, request):
        if milvus_server.version < (2, 4):
            request.applymarker(pytest.mark.xfail(strict=True, reason=(
                "Milvus 2.3.5 routes an upserted row to a partition computed from the wrong field "
                "(milvus-io/milvus#30607, fixed after 2.3.5): filters on tenant_id prune to the right "
                "partition and miss the row")))
        rows = grid_rows()
        for f in GRID_FILTERS:
            expected = {r.id for r in rows if reference_match(r, f)}
            assert ({h.id for h in self.search(partitioned, "apple", f)}, partitioned.count(f),
                    set(partitioned.ids(f))) == (expected, len(expected), expected), f

    def test_filters_hold_on_a_flushed_and_indexed_segment(self, index):
        """The HNSW graph of a sealed segment, not the brute-force search of a growing one, under every filter."""
        rnd = random.Random(11)
        words = "apple pie recipe invoice total budget plan merger report holiday schedule".split()
        # Milvus builds no index for a segment of fewer than 1024 rows (minSegmentNumRowsToEnableIndex).
        texts = [" ".join(rnd.sample(words, 3)) for _ in range(1200)]
        rows = [replace(row, id=f"chunk:{n}", text=text, vector=hash_vector(text))
                for n, (row, text) in enumerate(zip(grid_rows() * 20, texts))]
        index.upsert(rows)
        client, name = index._client(), f"{index.prefix}_64"
        client.flush(name)
        deadline = time.monotonic() + 60
        while (info := client.describe_index(name, "vector"))["indexed_rows"] < len(rows):
            assert time.monotonic() < deadline, info
            time.sleep(0.2)
        assert info["index_type"] == "HNSW"
        for f in GRID_FILTERS:
            expected = {r.id for r in rows if reference_match(r, f)}
            hits = index.search(hash_vector("apple pie recipe"), f, 50)
            assert hits and {h.id for h in hits} <= expected and index.count(f) == len(expected), f
        by_id = {r.id: r for r in rows}
        for row in rows[:5]:  # a row's own vector finds it first, score 1, through the graph
            f = flt(row.tenant_id, (row.kb_id,), statuses=(row.status,))
            top = index.search(row.vector, f, 5)[0]
            assert round(top.score, 4) == 1.0 and by_id[top.id].vector == row.vector


# --- the loader: retrieval.backends.vector_index() / keyword_index()


def test_backends_are_built_once_per_process_from_settings(settings, tmp_path):
    from retrieval.backends import keyword_index
    from retrieval.backends.sqlite_fts import SqliteKeywordIndex

    settings.LOCI_KEYWORD_INDEX = {"BACKEND": "retrieval.backends.sqlite_fts.SqliteKeywordIndex",
                                   "OPTIONS": {"path": str(tmp_path / "a.sqlite3")}}
    first = keyword_index()
    assert isinstance(first, SqliteKeywordIndex) and keyword_index() is first
    settings.LOCI_KEYWORD_INDEX = {**settings.LOCI_KEYWORD_INDEX, "OPTIONS": {"path": str(tmp_path / "b.sqlite3")}}
    assert keyword_index() is not first and keyword_index().path == tmp_path / "b.sqlite3"


@pytest.mark.parametrize("conf", [None, {}, {"BACKEND": "retrieval.backends.nope.Index"},
                                  {"BACKEND": "retrieval.backends.sqlite_fts.NoSuchClass"},
                                  {"BACKEND": "retrieval.backends.sqlite_fts.SqliteKeywordIndex", "OPTIONS": []},
                                  {"BACKEND": "retrieval.backends.sqlite_fts.SqliteKeywordIndex", "OPTIONS": {}}])
def test_bad_entries_are_improperly_configured(settings, conf):
    from django.core.exceptions import ImproperlyConfigured

    from retrieval.backends import keyword_index

    settings.LOCI_KEYWORD_INDEX = conf
    with pytest.raises(ImproperlyConfigured):
        keyword_index()


def test_vector_index_from_settings_uses_the_session_server(lite_vector_settings):
    from retrieval.backends import vector_index

    vector_index().upsert([make_row("chunk:1", "hello world")])
    assert [h.id for h in vector_index().search(hash_vector("hello world"), flt(), 3)] == ["chunk:1"]


def test_the_loader_takes_named_aliases_and_builds_each_once(settings, tmp_path):
    from common.backends import BackendDoesNotExist
    from retrieval.backends import keyword_index

    settings.LOCI_KEYWORD_INDEX = {
        "default": {"BACKEND": "retrieval.backends.sqlite_fts.SqliteKeywordIndex", "OPTIONS": {"path": str(tmp_path / "d.sqlite3")}},
        "archive": {"BACKEND": "retrieval.backends.sqlite_fts.SqliteKeywordIndex", "OPTIONS": {"path": str(tmp_path / "a.sqlite3")}},
    }
    keyword_index("archive").upsert([make_row("chunk:1", "archived alpha")])
    assert keyword_index("archive") is keyword_index("archive") and keyword_index() is not keyword_index("archive")
    assert [h.id for h in keyword_index("archive").search("alpha", flt(), 3)] == ["chunk:1"]
    assert keyword_index().search("alpha", flt(), 3) == []
    assert keyword_index(build=2).path == tmp_path / "d.b2.sqlite3"  # a build is a namespace of its own
    with pytest.raises(BackendDoesNotExist):
        keyword_index("nope")


class _NotThreadSafe:
    def __init__(self, options):
        self.options = options


def test_a_backend_that_is_not_thread_safe_gets_one_instance_per_thread(settings, tmp_path):
    from retrieval.backends import keyword_index

    settings.LOCI_KEYWORD_INDEX = {"default": {"BACKEND": "tests.test_index_contract._NotThreadSafe"},
                                   "shared": {"BACKEND": "retrieval.backends.sqlite_fts.SqliteKeywordIndex",
                                              "OPTIONS": {"path": str(tmp_path / "k.sqlite3")}}}
    seen = {}

    def grab(name):
        seen[name] = (keyword_index(), keyword_index("shared"))

    threads = [threading.Thread(target=grab, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert keyword_index() is keyword_index() and len({id(seen[0][0]), id(seen[1][0]), id(keyword_index())}) == 3
    assert seen[0][1] is seen[1][1] is keyword_index("shared")  # thread_safe: one per process


# --- the embedder contract, over each local embedder (the remote one: tests/test_embeddings.py)


@pytest.fixture(params=["e5-small-onnx", "e5-small", "use"], scope="module")
def local_embedder(request):
    from retrieval.embeddings import build_provider

    return build_provider(request.param)


def test_embedder_rows_are_unit_float32_one_per_text_in_order(local_embedder):
    import numpy as np

    rows = local_embedder.embed_documents(["a grey cat", "quarterly budget", "a grey cat"])
    assert rows.dtype == np.float32 and rows.shape == (3, local_embedder.dim)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(rows[0], rows[2], atol=1e-6)  # deterministic: what the disk cache relies on
    assert float(rows[0] @ rows[1]) < 0.99
    assert local_embedder.embed_documents([]).shape == (0, local_embedder.dim)
    query = local_embedder.embed_query("grey cat")
    assert query.shape == (local_embedder.dim,) and abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    assert local_embedder.name and getattr(local_embedder, "thread_safe", False)


def test_embedder_refuses_wrong_argument_types(local_embedder):
    for bad in ("one string", ["ok", 3]):
        with pytest.raises(TypeError):
            local_embedder.embed_documents(bad)
