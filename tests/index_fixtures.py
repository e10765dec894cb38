"""Index fixtures for any test module: `from tests.index_fixtures import milvus_lite_uri, ...`.

- `milvus_lite_uri` (session): one Milvus Lite server on a free port in a temporary directory.
- `sqlite_keyword_index`, `milvus_vector_index`: a fresh backend per test (own file / own prefix).
- `opensearch_keyword_index`, `remote_milvus_vector_index`: only when OPENSEARCH_URL / MILVUS_URI
  are set, skipped otherwise.
- `lite_vector_settings`: points settings.LOCI_VECTOR_INDEX at the session server with a per-test
  collection prefix, so code calling `vector_index()` never starts a server over var/.
- `hash_vector`, `make_row`, `reference_match`: deterministic vectors, rows, and the filter
  semantics written out in plain Python for comparing backends against.
"""

import hashlib
import math
import os
import socket
import uuid

import pytest

from retrieval.backends.base import IndexFilter, IndexRow
from retrieval.text import tokenize

DIM = 64


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hash_vector(text: str, dim: int = DIM) -> list[float]:
    """A unit bag-of-terms vector: texts sharing terms are similar, identical texts score 1.0."""
    vec = [0.0] * dim
    for term in tokenize(text) or [text]:
        digest = hashlib.blake2b(term.encode(), digest_size=8).digest()
        vec[digest[0] % dim] += 1.0 if digest[1] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vec)) or 1.0
    if not any(vec):
        vec[0], norm = 1.0, 1.0
    return [x / norm for x in vec]


def make_row(id: str, text: str, *, tenant_id: int = 1, kb_id: int = 1, kind: str = "chunk", dim: int = DIM,
             **fields) -> IndexRow:
    """An IndexRow whose vector is hash_vector(text)."""
    return IndexRow(id=id, tenant_id=tenant_id, kb_id=kb_id, kind=kind, text=text,
                    vector=fields.pop("vector", None) or hash_vector(text, dim), **fields)


def reference_match(row: IndexRow, flt: IndexFilter) -> bool:
    """IndexFilter semantics in plain Python: every set field narrows, empty tuples do not (kb_ids does)."""
    return (
        row.tenant_id == flt.tenant_id
        and row.kb_id in flt.kb_ids
        and (not flt.kinds or row.kind in flt.kinds)
        and (not flt.document_ids or row.document_id in flt.document_ids)
        and (not flt.parent_ids or row.parent_id in flt.parent_ids)
        and (not flt.ids or row.id in flt.ids)
        and (not flt.statuses or row.status in flt.statuses)
        and (flt.user_id is None or row.user_id == flt.user_id)
        and (flt.session_id is None or row.session_id == flt.session_id)
    )


@pytest.fixture(scope="session")
def milvus_lite_uri(tmp_path_factory):
    """URI of a Milvus Lite server shared by the whole test session."""
    from retrieval.milvus_lite import ensure_server, stop_server

    path = tmp_path_factory.mktemp("milvus") / "milvus.db"
    uri = ensure_server(path, free_port())
    yield uri
    stop_server(path)


def _prefix(sep: str = "_") -> str:
    return f"test{sep}{uuid.uuid4().hex[:10]}"


@pytest.fixture
def sqlite_keyword_index(tmp_path):
    from retrieval.backends.sqlite_fts import SqliteKeywordIndex

    index = SqliteKeywordIndex({"path": str(tmp_path / "keyword.sqlite3")})
    yield index
    index.close()


def _milvus(uri: str):
    from retrieval.backends.milvus import MilvusVectorIndex

    index = MilvusVectorIndex({"uri": uri, "token": os.environ.get("MILVUS_TOKEN", ""),
                               "collection_prefix": _prefix(), "index_type": "IVF_FLAT"})
    yield index
    index.drop_all()
    index.close()


@pytest.fixture
def milvus_vector_index(milvus_lite_uri):
    yield from _milvus(milvus_lite_uri)


@pytest.fixture
def remote_milvus_vector_index():
    if not os.environ.get("MILVUS_URI"):
        pytest.skip("MILVUS_URI not set")
    yield from _milvus(os.environ["MILVUS_URI"])


@pytest.fixture
def opensearch_keyword_index():
    if not os.environ.get("OPENSEARCH_URL"):
        pytest.skip("OPENSEARCH_URL not set")
    from retrieval.backends.opensearch import OpenSearchKeywordIndex

    index = OpenSearchKeywordIndex({"url": os.environ["OPENSEARCH_URL"], "index_prefix": _prefix("-"),
                                    "verify_certs": os.environ.get("OPENSEARCH_VERIFY_CERTS", "1") != "0",
                                    "replicas": 0})
    yield index
    index.drop_all()
    index.close()


@pytest.fixture
def lite_vector_settings(settings, milvus_lite_uri):
    """settings.LOCI_VECTOR_INDEX on the session Milvus Lite server, collections dropped afterwards."""
    from retrieval.backends import reset_backends, vector_index

    settings.LOCI_VECTOR_INDEX = {
        "BACKEND": "retrieval.backends.milvus.MilvusVectorIndex",
        "OPTIONS": {"uri": milvus_lite_uri, "collection_prefix": _prefix(), "index_type": "IVF_FLAT"},
    }
    yield settings.LOCI_VECTOR_INDEX
    vector_index().drop_all()
    reset_backends()
