"""The embedded vector index across processes: each process scores its own copy of the file's rows,
so what one process writes or deletes must be what every other finds at its next search, and a
process killed in the middle of a write must leave the file whole."""

import multiprocessing
import os
import signal
import sqlite3
import time

import pytest

from retrieval.backends.base import IndexFilter
from retrieval.backends.sqlite_vectors import SqliteVectorIndex
from tests.index_fixtures import hash_vector, make_row, sqlite_vector_index  # noqa: F401

CTX = multiprocessing.get_context("fork")


def flt(kb_ids=(1,), **kw) -> IndexFilter:
    return IndexFilter(tenant_id=1, kb_ids=kb_ids, **kw)


def _found(index, text, f, top_k=-1):
    return {h.id for h in index.search(hash_vector(text), f, top_k)}


def _write_and_search(path, kb, other_kb, rounds, errors):
    index = SqliteVectorIndex({"path": path})
    try:
        mine = set()
        for n in range(rounds):
            rows = [make_row(f"chunk:{kb}-{n}-{i}", "shared words here", kb_id=kb) for i in range(10)]
            index.upsert(rows)
            mine |= {r.id for r in rows}
            seen = _found(index, "shared words here", flt((kb,)))
            assert seen == mine, f"process of KB {kb} lost its own rows: {len(seen)} of {len(mine)}"
            _found(index, "shared words here", flt((other_kb,)))  # keeps a copy of the other's partition
        deadline = time.monotonic() + 60
        while len(_found(index, "shared words here", flt((other_kb,)))) < 10 * rounds:
            assert time.monotonic() < deadline, "never saw the other process's rows"
            time.sleep(0.05)
    except BaseException as exc:
        errors.put(repr(exc))
        raise


def test_two_processes_writing_and_searching_at_once_each_see_every_row(sqlite_vector_index):
    path = str(sqlite_vector_index.path)
    sqlite_vector_index.upsert([make_row("chunk:warm", "warm", kb_id=3)])
    errors = CTX.Queue()
    procs = [CTX.Process(target=_write_and_search, args=(path, kb, 3 - kb, 25, errors)) for kb in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0], errors.get(timeout=1) if not errors.empty() else ""
    assert len(_found(sqlite_vector_index, "shared words here", flt((1, 2)))) == 500


def _delete_document(path, document_id):
    SqliteVectorIndex({"path": path}).delete(IndexFilter(tenant_id=1, kb_ids=(1,), document_ids=(document_id,),
                                                         statuses=()))


def _upsert(path, rows):
    SqliteVectorIndex({"path": path}).upsert(rows)


def _run(target, *args):
    p = CTX.Process(target=target, args=args)
    p.start()
    p.join(60)
    assert p.exitcode == 0


def test_a_delete_or_change_in_another_process_is_seen_at_the_next_search(sqlite_vector_index):
    index, path = sqlite_vector_index, str(sqlite_vector_index.path)
    index.upsert([make_row(f"chunk:{d}-{i}", "quarterly revenue", document_id=d) for d in (5, 6) for i in range(3)])
    assert len(_found(index, "quarterly revenue", flt())) == 6  # this process now holds a copy

    _run(_delete_document, path, 5)
    assert _found(index, "quarterly revenue", flt()) == {f"chunk:6-{i}" for i in range(3)}

    # Moved to another KB, disabled, and re-added: each seen as it is now.
    _run(_upsert, path, [make_row("chunk:6-0", "quarterly revenue", kb_id=2, document_id=6),
                         make_row("chunk:6-1", "quarterly revenue", document_id=6, status="disabled"),
                         make_row("chunk:5-0", "quarterly revenue", document_id=5)])
    assert _found(index, "quarterly revenue", flt()) == {"chunk:6-2", "chunk:5-0"}
    assert _found(index, "quarterly revenue", flt((2,))) == {"chunk:6-0"}
    _run(_upsert, path, [make_row("chunk:6-0", "quarterly revenue", kb_id=1, document_id=6)])
    assert _found(index, "quarterly revenue", flt((1, 2))) == {"chunk:6-0", "chunk:6-2", "chunk:5-0"}


def test_a_copy_survives_many_deletes_elsewhere(sqlite_vector_index):
    """Enough rows deleted by another process that this process's copy is compacted: same answers."""
    index, path = sqlite_vector_index, str(sqlite_vector_index.path)
    index.upsert([make_row(f"chunk:{n}", f"note number {n % 7}", document_id=n % 3) for n in range(3000)])
    assert len(_found(index, "note number 1", flt())) == 3000
    _run(_delete_document, path, 0)
    _run(_delete_document, path, 1)
    left = {f"chunk:{n}" for n in range(3000) if n % 3 == 2}
    assert _found(index, "note number 1", flt()) == left
    top = index.search(hash_vector("note number 2"), flt(), 5)
    assert all(h.id in left and round(h.score, 4) == 1.0 for h in top)
    assert index.search(hash_vector("x"), flt(ids=("chunk:2", "chunk:0")), 5)[0].id == "chunk:2"


def _write_forever(path):
    index = SqliteVectorIndex({"path": path})
    n = 0
    while True:
        index.upsert([make_row(f"chunk:{n}-{i}", "killed writer row") for i in range(200)])
        n += 1


def test_a_writer_killed_mid_write_leaves_whole_transactions_and_a_usable_file(sqlite_vector_index):
    index, path = sqlite_vector_index, str(sqlite_vector_index.path)
    index.upsert([make_row("chunk:before", "killed writer row")])
    assert len(_found(index, "killed writer row", flt())) == 1
    p = CTX.Process(target=_write_forever, args=(path,))
    p.start()
    deadline = time.monotonic() + 60
    while index.count(flt()) < 1 + 600 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGKILL)
    p.join(10)
    assert p.exitcode == -signal.SIGKILL
    written = index.count(flt())
    assert written > 600 and (written - 1) % 200 == 0  # every batch whole or absent
    assert len(_found(index, "killed writer row", flt())) == written
    index.upsert([make_row("chunk:after", "killed writer row")])  # no lock left behind
    assert "chunk:after" in _found(index, "killed writer row", flt())
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("field", ["user_id", "session_id", "status"])
def test_a_field_the_filter_names_narrows_through_the_copy_and_the_file_alike(sqlite_vector_index, field):
    index = sqlite_vector_index
    index.upsert([make_row("chunk:a", "alpha", **{field: "x"}), make_row("chunk:b", "alpha", **{field: "y"})])
    name = field if field != "status" else "statuses"
    value = "x" if field != "status" else ("x",)
    f = flt(**{name: value})
    assert _found(index, "alpha", f) == {"chunk:a"} and list(index.ids(f)) == ["chunk:a"] and index.count(f) == 1



def _write_and_delete_rounds(path):
    index = SqliteVectorIndex({"path": path})
    for n in range(6):
        index.upsert([make_row(f"chunk:w{n}-{i}", "steady row", document_id=2) for i in range(800)])
        if n % 2:
            index.delete(IndexFilter(tenant_id=1, kb_ids=(1,), document_ids=(2,), statuses=()))
        time.sleep(0.05)


def test_threads_searching_while_another_process_writes_and_deletes_see_whole_rows(sqlite_vector_index):
    """Searches score a view of the partition taken under its lock while catch-ups grow, overwrite
    and compact it: every hit is a row as some write left it, and the end state is exact."""
    import threading

    index, path = sqlite_vector_index, str(sqlite_vector_index.path)
    index.upsert([make_row(f"chunk:{n}", "steady row", document_id=1) for n in range(2000)])
    writer = CTX.Process(target=_write_and_delete_rounds, args=(path,))
    writer.start()  # forked before any thread of this process runs
    stop, errors = threading.Event(), []

    def search():
        while not stop.is_set():
            try:
                for hit in index.search(hash_vector("steady row"), flt(), 50):
                    assert hit.extra["kind"] == "chunk" and hit.extra["kb_id"] == 1
                    assert abs(hit.score - 1.0) < 1e-4  # every row has this vector: a torn one would not
            except Exception as exc:  # noqa: BLE001 - asserted below
                errors.append(exc)
                return

    threads = [threading.Thread(target=search) for _ in range(4)]
    for t in threads:
        t.start()
    writer.join(120)
    stop.set()
    for t in threads:
        t.join(30)
    assert writer.exitcode == 0 and errors == []
    assert _found(index, "steady row", flt()) == {f"chunk:{n}" for n in range(2000)}  # the last delete took w5


def test_a_hit_says_its_rows_script_only_where_the_row_was_written_with_one(sqlite_vector_index):
    """Search reads a hit's script instead of its text (IndexRow.script); a row written before the
    field existed says none, even beside newer rows of its partition that do, so its text is read."""
    from dataclasses import replace

    old = make_row("memory:old", "an old row", kb_id=1)
    sqlite_vector_index.upsert([old])  # the partition's first rows have no script at all
    sqlite_vector_index.upsert([replace(make_row("memory:zh", "一行", kb_id=1), script="cjk"),
                                replace(make_row("memory:en", "a row", kb_id=1), script="latin")])
    extra = {h.id: h.extra for h in sqlite_vector_index.search(hash_vector("row"), flt(), -1)}
    assert extra["memory:zh"]["script"] == "cjk" and extra["memory:en"]["script"] == "latin"
    assert "script" not in extra["memory:old"]
    assert extra["memory:old"]["kind"] == extra["memory:zh"]["kind"]  # the other fields as before
