"""Milvus filter expressions: pinned as strings, then checked against Milvus Lite and a Milvus server."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from retrieval.backends import clean_filter
from retrieval.backends.base import IndexFilter
from retrieval.backends.milvus import MilvusVectorIndex, build_expr, collection_name, string_literal
from tests.index_fixtures import (  # noqa: F401  (fixtures are found by name)
    _server_collections,
    make_row,
    milvus_server,
    milvus_vector_index,
    server_milvus_vector_index,
)

HOSTILE = ['x" or tenant_id > 0 or "', 'x\\" or tenant_id > 0 or \\"', "\\", '"', "it's", "a' or 'a'=='a",
           "]) or (1==1", "中文 tab", "%_*"]


def expr(**kw):
    return build_expr(clean_filter(IndexFilter(**{"tenant_id": 1, "kb_ids": (1,), **kw})))


def test_minimal_filter():
    assert expr() == 'tenant_id == 1 and kb_id == 1 and status == "active"'


def test_full_filter():
    assert expr(kb_ids=(3, 4), kinds=("episode", "atomic_fact"), document_ids=(7,), parent_ids=("memory:p",),
                ids=("memory:a",), user_id="u", session_id="s", statuses=()) == (
        'tenant_id == 1 and kb_id in [3, 4] and document_id == 7 and kind in ["episode", "atomic_fact"] '
        'and parent_id == "memory:p" and id == "memory:a" and user_id == "u" and session_id == "s"'
    )


def test_strings_are_escaped_literals():
    assert string_literal('x" or tenant_id > 0 or "') == r'"x\" or tenant_id > 0 or \""'
    assert string_literal("back\\slash") == r'"back\\slash"'
    assert string_literal('\\" or id != "') == r'"\\\" or id != \""'


def test_values_the_expression_language_cannot_spell_match_nothing():
    assert string_literal("a\nb") is None
    assert expr(user_id="a\nb") is None
    assert expr(parent_ids=("a\x00b",)) is None
    assert expr(parent_ids=("a\x00b", "ok")) == (
        'tenant_id == 1 and kb_id == 1 and parent_id == "ok" and status == "active"')


def test_no_permitted_kb_is_no_expression():
    assert expr(kb_ids=()) is None


@pytest.mark.parametrize("bad", [{"tenant_id": "1 or 1==1"}, {"kb_ids": ("1) or (1",)}, {"document_ids": (True,)}])
def test_ints_are_ints(bad):
    with pytest.raises(ValueError):
        expr(**bad)


def test_collection_names_carry_the_dimension():
    assert collection_name("loci", 384) == "loci_384"
    assert collection_name("loci", 384, 12) == "loci_t12_384"


@pytest.mark.parametrize("options", [{"collection_prefix": "bad-prefix;drop"}, {"index_type": "DISKANN"},
                                     {"index_type": "HNSW"}, {"lite_path": ""}])
def test_bad_options_are_improperly_configured(options):
    with pytest.raises(ImproperlyConfigured):
        MilvusVectorIndex({"uri": "", "lite_path": "/tmp/x/milvus.db", **options})


@pytest.fixture(params=["lite", "server"])
def any_milvus_index(request):
    """The backend on Milvus Lite, then on a Milvus server (see tests/index_fixtures.py: milvus_server)."""
    names = {"lite": "milvus_vector_index", "server": "server_milvus_vector_index"}
    return request.getfixturevalue(names[request.param])


def test_hostile_values_round_trip_exactly_on_the_server(any_milvus_index):
    """A row whose user_id *is* the hostile string is found by it, and nothing else is."""
    index = any_milvus_index
    index.upsert([make_row(f"chunk:{n}", "same text", user_id=v, session_id=v, parent_id=v)
                  for n, v in enumerate(HOSTILE)])
    index.upsert([make_row("chunk:other-tenant", "same text", tenant_id=2, user_id=HOSTILE[0])])
    for n, value in enumerate(HOSTILE):
        for field in ("user_id", "session_id", "parent_ids"):
            f = IndexFilter(tenant_id=1, kb_ids=(1,), **{field: (value,) if field == "parent_ids" else value})
            hits = index.search(make_row("q", "same text").vector, f, 50)
            assert [h.id for h in hits] == [f"chunk:{n}"], (field, value)
            assert index.count(f) == 1
    assert index.delete(IndexFilter(tenant_id=1, kb_ids=(1,), user_id=HOSTILE[0], statuses=())) == 1
    assert index.count(IndexFilter(tenant_id=1, kb_ids=(1,))) == len(HOSTILE) - 1
    assert index.count(IndexFilter(tenant_id=2, kb_ids=(1,))) == 1


def test_concurrent_ensure_server_starts_one_server(tmp_path):
    import threading

    from retrieval.milvus_lite import client as milvus_lite  # its _children: the servers this process started
    from tests.index_fixtures import free_port

    path, port = tmp_path / "milvus.db", free_port()
    before = len(milvus_lite._children)
    uris = []
    threads = [threading.Thread(target=lambda: uris.append(milvus_lite.ensure_server(path, port))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert uris == [f"http://127.0.0.1:{port}"] * 4
        assert len(milvus_lite._children) == before + 1  # the lock let exactly one caller start it
    finally:
        assert milvus_lite.stop_server(path)


def test_parents_or_ids():
    assert expr(kinds=("episode", "atomic_fact"), parent_ids=("memory:p",), or_ids=("memory:a", "memory:b")) == (
        'tenant_id == 1 and kb_id == 1 and kind in ["episode", "atomic_fact"] '
        'and (parent_id == "memory:p" or id in ["memory:a", "memory:b"]) and status == "active"')
    assert expr(or_ids=("memory:a",)) == 'tenant_id == 1 and kb_id == 1 and id == "memory:a" and status == "active"'
    assert expr(parent_ids=("a\x00b",), or_ids=('x" or id != "',)) == (
        'tenant_id == 1 and kb_id == 1 and id == "x\\" or id != \\"" and status == "active"')
    assert expr(parent_ids=("a\x00b",), or_ids=("a\nb",)) is None
