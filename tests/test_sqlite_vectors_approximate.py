"""The embedded vector index's approximate path (retrieval/backends/coarse.py): a large partition is
searched through an IVF, and what a user sees must stay what the exact scan shows: only rows the
filter lets through, never a deleted row, a new or changed row at the next search, exact scores."""

import multiprocessing
import time

import numpy as np
import pytest

from retrieval.backends.base import IndexFilter, IndexRow
from retrieval.backends.sqlite_vectors import SqliteVectorIndex

CTX = multiprocessing.get_context("fork")
DIM = 16
ROWS = 3000


def _matrix(n=ROWS, seed=3):
    """Unit rows around 60 centres, as real memories cluster by topic."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(60, DIM)).astype(np.float32)
    rows = centres[rng.integers(60, size=n)] + rng.normal(0, 0.4, size=(n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _rows(matrix, start=0, **fields):
    return [
        IndexRow(
            id=f"memory:{start + i}",
            tenant_id=1,
            kb_id=1,
            kind="atomic_fact",
            vector=v.tolist(),
            status="active" if (start + i) % 3 else "superseded",
            document_id=(start + i) % 7,
            **fields,
        )
        for i, v in enumerate(matrix)
    ]


def flt(**kw) -> IndexFilter:
    return IndexFilter(tenant_id=1, kb_ids=(1,), **kw)


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "vectors.sqlite3")


@pytest.fixture
def indexes(path):
    """(approximate, exact) over one file: the IVF from 1,000 rows, every filter through it."""
    approx = SqliteVectorIndex({"path": path, "approximate_rows": 1000, "exact_rows": 0, "approximate_build": "inline"})
    exact = SqliteVectorIndex({"path": path, "approximate_rows": 0})
    yield approx, exact
    approx.close()
    exact.close()


def _coarse(index):
    return [part.coarse for part in index._parts.values() if part.coarse is not None]


def _ids(index, vector, f, k=20):
    return [h.id for h in index.search(vector.tolist(), f, k)]


def test_a_large_partition_answers_through_its_ivf_what_the_exact_scan_answers(indexes):
    approx, exact = indexes
    matrix = _matrix()
    approx.upsert(_rows(matrix))
    queries = _matrix(40, seed=9)
    overlap = []
    for q in queries:
        got, want = approx.search(q.tolist(), flt(), 20), exact.search(q.tolist(), flt(), 20)
        overlap.append(len({h.id for h in got} & {h.id for h in want}) / 20)
        scores = {h.id: h.score for h in want}
        assert all(abs(h.score - scores[h.id]) < 1e-5 for h in got if h.id in scores)  # exact, not 8-bit, scores
        assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
    assert len(_coarse(approx)) == 1 and not _coarse(exact)
    assert np.mean(overlap) >= 0.95


@pytest.mark.parametrize(
    "narrowing",
    [{"statuses": ("superseded",)}, {"document_ids": (2, 5)}, {"statuses": ("active",), "document_ids": (3,)}],
)
def test_filters_are_applied_inside_the_ivf_scan(indexes, narrowing):
    approx, exact = indexes
    approx.upsert(_rows(_matrix()))
    allowed = {
        r.id
        for r in _rows(_matrix())
        if (
            ("statuses" not in narrowing or r.status in narrowing["statuses"])
            and ("document_ids" not in narrowing or r.document_id in narrowing["document_ids"])
        )
    }
    for q in _matrix(20, seed=5):
        got = _ids(approx, q, flt(**narrowing))
        assert len(got) == 20 and set(got) <= allowed  # a full answer, and only rows the filter lets through
        assert got[0] == _ids(exact, q, flt(**narrowing))[0]
    assert _coarse(approx)


def _delete(path, ids):
    SqliteVectorIndex({"path": path}).delete(flt(ids=tuple(ids), statuses=()))


def test_a_row_deleted_by_another_process_is_never_proposed_by_the_ivf(indexes, path):
    approx, _ = indexes
    matrix = _matrix()
    approx.upsert(_rows(matrix))
    q = matrix[10]
    before = _ids(approx, q, flt(statuses=()))
    coarse = _coarse(approx)[0]
    p = CTX.Process(target=_delete, args=(path, before[:5]))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    after = _ids(approx, q, flt(statuses=()))
    assert not set(before[:5]) & set(after) and after[:15] == before[5:20]
    assert _coarse(approx) == [coarse]  # deletes are a filter on the same IVF: nothing rebuilt


def test_rows_written_after_the_build_are_found_without_a_rebuild(indexes):
    approx, _ = indexes
    matrix = _matrix()
    approx.upsert(_rows(matrix))
    _ids(approx, matrix[0], flt())
    coarse = _coarse(approx)[0]
    fresh = _matrix(50, seed=21)
    approx.upsert(_rows(fresh, start=ROWS))
    for i, v in enumerate(fresh):
        assert _ids(approx, v, flt(statuses=()), 1) == [f"memory:{ROWS + i}"]
    # A row rewritten with another vector is found by, and scored against, the vector it holds now.
    approx.upsert(
        [IndexRow(id="memory:1", tenant_id=1, kb_id=1, kind="atomic_fact", vector=fresh[0].tolist(), status="active")]
    )
    hits = approx.search(fresh[0].tolist(), flt(statuses=()), 3)
    assert {h.id for h in hits[:2]} == {"memory:1", f"memory:{ROWS}"} and hits[0].score == pytest.approx(1.0)
    assert _ids(approx, matrix[1], flt(), 20).count("memory:1") == 0
    assert _coarse(approx) == [coarse]


def test_small_partitions_and_long_answers_are_scored_exactly(path):
    index = SqliteVectorIndex({"path": path, "approximate_rows": 5000, "approximate_build": "inline"})
    matrix = _matrix()
    index.upsert(_rows(matrix))
    exact = SqliteVectorIndex({"path": path, "approximate_rows": 0})
    for q in _matrix(10, seed=4):
        assert _ids(index, q, flt()) == _ids(exact, q, flt())
    assert not _coarse(index)  # 3,000 rows: under the threshold, no IVF
    index.upsert(_rows(_matrix(2500, seed=8), start=ROWS))
    q = matrix[0]
    assert len(index.search(q.tolist(), flt(statuses=()), -1)) == 5500  # every row: the exact scan
    assert _coarse(index)
    selective = flt(ids=tuple(f"memory:{i}" for i in range(0, 600, 3)))  # few rows pass: gathered, exact
    assert _ids(index, q, selective) == _ids(exact, q, selective)


def test_the_background_build_leaves_searches_exact_until_it_is_ready(path):
    index = SqliteVectorIndex({"path": path, "approximate_rows": 1000})
    exact = SqliteVectorIndex({"path": path, "approximate_rows": 0})
    matrix = _matrix()
    index.upsert(_rows(matrix))
    assert _ids(index, matrix[7], flt()) == _ids(exact, matrix[7], flt())
    deadline, written = time.monotonic() + 60, 0
    while not _coarse(index):
        assert time.monotonic() < deadline, "the IVF was never built"
        index.upsert(_rows(matrix[:1], start=ROWS + written))  # writes while it builds: logged, added after
        written += 1
        _ids(index, matrix[0], flt(statuses=()))
        time.sleep(0.02)
    copies = {f"memory:{ROWS + i}" for i in range(written)} | {"memory:0"}
    assert set(_ids(index, matrix[0], flt(statuses=()), len(copies))) == copies
    assert _ids(index, matrix[7], flt())[0] == "memory:7"


def test_bad_options_are_refused(path):
    from django.core.exceptions import ImproperlyConfigured

    for options in ({"probe_share": 0}, {"probe_share": 1.5}, {"approximate_rows": -1}, {"approximate_build": "later"}):
        with pytest.raises(ImproperlyConfigured):
            SqliteVectorIndex({"path": path, **options})


def test_a_warm_start_builds_the_ivf_of_each_large_partition_before_the_first_search(path):
    SqliteVectorIndex({"path": path}).upsert(
        _rows(_matrix()) + [IndexRow(id="memory:e", tenant_id=1, kb_id=1, kind="episode", vector=[1.0] * DIM)]
    )
    starting = SqliteVectorIndex({"path": path, "approximate_rows": 1000})
    starting.preload()
    assert len(_coarse(starting)) == 1  # the facts' partition; the one-row episodes' needs none
    assert _ids(starting, _matrix()[4], flt())[0] == "memory:4"
