"""The tantivy keyword index across processes (the shared contract: tests/test_index_contract.py).

Web and worker processes write one directory: one writer at a time through the lock file, and every
process sees the others' commits, deletes included, at its next search. A writer killed mid-write
leaves the index usable, with every row it had committed.
"""

import multiprocessing
import os
import signal
import time

import pytest

from retrieval.backends.base import IndexFilter
from retrieval.backends.tantivy_keywords import GENERATION, TantivyKeywordIndex
from tests.index_fixtures import make_row, tantivy_keyword_index  # noqa: F401  (fixture)

FORK = multiprocessing.get_context("fork")


def flt(tenant_id=1, kb_ids=(1,), **kw) -> IndexFilter:
    return IndexFilter(tenant_id=tenant_id, kb_ids=kb_ids, **kw)


def _write_and_search(directory, proc, rounds, errors):
    try:
        index = TantivyKeywordIndex({"directory": directory})
        for n in range(rounds):
            index.upsert([make_row(f"chunk:{proc}-{n}-{i}", f"shared words proc{proc} round{n}") for i in range(5)])
            found = {h.id for h in index.search(f"proc{proc} round{n}", flt(), 20)}
            if not {f"chunk:{proc}-{n}-{i}" for i in range(5)} <= found:  # its own write, at once
                errors.put(f"process {proc} round {n}: its rows were not found")
            index.search("shared words", flt(), 10)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which asserts
        errors.put(f"process {proc}: {exc!r}")


def test_two_processes_write_and_search_at_once(tantivy_keyword_index):
    index = tantivy_keyword_index
    index.upsert([make_row("chunk:warm", "warm")])  # jieba loaded before the fork: children start at once
    errors = FORK.Queue()
    procs = [FORK.Process(target=_write_and_search, args=(str(index.directory), p, 12, errors)) for p in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert errors.empty(), errors.get()
    assert index.count(flt()) == 1 + 2 * 12 * 5  # and this process sees both, without reopening anything
    assert len({h.id for h in index.search("proc1", flt(), 100)}) == 60


def _write_until_killed(directory, progress):
    index = TantivyKeywordIndex({"directory": directory})
    n = 0
    while True:
        index.upsert([make_row(f"chunk:k{n}-{i}", f"killed writer batch{n} " + "filler " * 50) for i in range(50)])
        with open(progress, "a") as fh:
            fh.write(f"{n}\n")
        n += 1


@pytest.mark.parametrize("into_batch", [0.0, 0.037, 0.11])  # somewhere in analysing, writing or committing
def test_a_writer_killed_mid_write_loses_only_what_it_had_not_committed(tantivy_keyword_index, tmp_path, into_batch):
    index = tantivy_keyword_index
    index.upsert([make_row("chunk:before", "committed before the crash")])
    progress = tmp_path / "progress"
    child = FORK.Process(target=_write_until_killed, args=(str(index.directory), str(progress)))
    child.start()
    deadline = time.monotonic() + 60
    while not (progress.exists() and len(progress.read_text().split()) >= 3) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(into_batch)
    os.kill(child.pid, signal.SIGKILL)
    child.join(10)
    done = len(progress.read_text().split())
    assert done >= 3

    # The lock went with the process: this one writes at once, and every committed batch is there.
    started = time.monotonic()
    index.upsert([make_row("chunk:after", "written after the crash")])
    assert time.monotonic() - started < 10
    assert index.count(flt()) in (2 + 50 * done, 2 + 50 * (done + 1))  # killed after a commit it had not logged
    assert [h.id for h in index.search("crash", flt(), 5)] in (["chunk:before", "chunk:after"],
                                                               ["chunk:after", "chunk:before"])
    assert len(index.search(f"batch{done - 1}", flt(), 100)) == 50
    fresh = TantivyKeywordIndex({"directory": str(index.directory)})  # a process starting afterwards
    assert fresh.count(flt()) == index.count(flt())


def _delete_one(directory, row_id, done):
    index = TantivyKeywordIndex({"directory": directory})
    done.put(index.delete(flt(ids=(row_id,), statuses=())))


def _search_after(directory, ready, go, out):
    index = TantivyKeywordIndex({"directory": directory})
    out.put(sorted(h.id for h in index.search("quarterly report", flt(), 10)))
    ready.set()
    go.wait(60)
    out.put(sorted(h.id for h in index.search("quarterly report", flt(), 10)))


def test_a_delete_in_one_process_is_seen_by_another_at_its_next_search(tantivy_keyword_index):
    index = tantivy_keyword_index
    index.upsert([make_row("memory:a", "quarterly report draft"), make_row("memory:b", "quarterly report final")])
    assert len(index.search("quarterly report", flt(), 10)) == 2  # this process's reader is warm

    done = FORK.Queue()
    deleter = FORK.Process(target=_delete_one, args=(str(index.directory), "memory:a", done))
    deleter.start()
    deleter.join(60)
    assert done.get(timeout=5) == 1
    assert [h.id for h in index.search("quarterly report", flt(), 10)] == ["memory:b"]

    # And the other way round: a process that searched before this one's delete.
    ready, go, out = FORK.Event(), FORK.Event(), FORK.Queue()
    reader = FORK.Process(target=_search_after, args=(str(index.directory), ready, go, out))
    reader.start()
    assert ready.wait(60)
    assert out.get(timeout=5) == ["memory:b"]
    assert index.delete(flt(ids=("memory:b",), statuses=())) == 1
    go.set()
    reader.join(60)
    assert out.get(timeout=5) == []


def _count_in_child(index, out):
    out.put(index.count(flt()))
    index.upsert([make_row("chunk:child", "child origin")])


def test_a_forked_child_uses_the_index_it_inherited(tantivy_keyword_index):
    index = tantivy_keyword_index
    index.upsert([make_row("chunk:parent", "parent origin")])
    assert index.search("parent", flt(), 5)  # a reader opened before the fork
    out = FORK.Queue()
    child = FORK.Process(target=_count_in_child, args=(index, out))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and out.get(timeout=5) == 1
    assert {h.id for h in index.search("origin", flt(), 5)} == {"chunk:parent", "chunk:child"}


@pytest.mark.parametrize("query", [
    'tenant_id:2', 'text:payroll OR tenant_id:*', '"payroll" AND NOT "x"', "payroll OR AND NOT ( ) [ ] { } ^ ~ *",
    "kb_id:[0 TO 99]", "id:chunk\\:other", "payroll\u0000", "'; DROP TABLE x; --", "IN (payroll)",
])
def test_hostile_queries_are_only_terms(tantivy_keyword_index, query):
    index = tantivy_keyword_index
    index.upsert([make_row("chunk:other", "payroll tenant_id 2 kb_id text and or not", tenant_id=2),
                  make_row("chunk:kb2", "payroll tenant_id 2 kb_id text and or not", kb_id=2),
                  make_row("chunk:mine", "payroll tenant_id 2 kb_id text and or not")])
    assert {h.id for h in index.search(query, flt(), 10)} <= {"chunk:mine"}


def test_a_very_long_query_ranks_on_its_first_terms_without_error(tantivy_keyword_index):
    index = tantivy_keyword_index
    index.upsert([make_row("chunk:1", "zebra stripes"), make_row("chunk:2", "unrelated words")])
    words = " ".join(f"word{n}" for n in range(20_000))
    assert [h.id for h in index.search("zebra " + words, flt(), 10)] == ["chunk:1"]  # within the first 64
    assert index.search(words + " zebra", flt(), 10) == []  # past them
    assert index.search("x" * 100_000, flt(), 10) == []  # one enormous term


def test_chinese_and_english_rows_side_by_side(tantivy_keyword_index):
    index = tantivy_keyword_index
    index.upsert([make_row("chunk:zh", "我们在北京大学学习机器学习"), make_row("chunk:en", "We study machine learning in Beijing"),
                  make_row("chunk:mix", "Python 机器学习 教程")])
    assert {h.id for h in index.search("机器学习", flt(), 10)} == {"chunk:zh", "chunk:mix"}
    assert {h.id for h in index.search("machine learning", flt(), 10)} == {"chunk:en"}
    assert {h.id for h in index.search("北京大学", flt(), 10)} == {"chunk:zh"}
    assert [h.id for h in index.search("python：教程", flt(), 10)] == ["chunk:mix"]


def test_an_index_of_an_older_generation_is_not_searched_and_drop_all_removes_it(tantivy_keyword_index):
    index = tantivy_keyword_index
    old = TantivyKeywordIndex({"directory": str(index.directory)})
    import retrieval.backends.tantivy_keywords as module

    module_generation = module.GENERATION
    try:
        module.GENERATION = "g1s1"  # what an older analysis wrote
        old.upsert([make_row("chunk:old", "dogs")])
        assert (index.directory / "g1s1" / "shared" / "meta.json").exists()
    finally:
        module.GENERATION = module_generation
    assert index.search("dogs", flt(), 10) == [] and index.count(flt(statuses=())) == 0 and index.is_empty()
    index.upsert([make_row("chunk:new", "dogs")])
    assert not index.is_empty()
    index.drop_all()
    assert not (index.directory / "g1s1").exists() and not (index.directory / GENERATION).exists()
    assert index.is_empty()


def test_a_metadata_range_is_decided_in_the_searched_snapshot(tantivy_keyword_index):
    index = tantivy_keyword_index
    index.upsert([make_row(f"chunk:{n}", "chapter text", metadata={"chapter": n}) for n in (-3, 0, 2, 10, 10**400 // 10**390)])
    from retrieval.backends.base import MetadataCondition

    def chapters(op, bound):
        hits = index.search("chapter", flt(metadata=(MetadataCondition("chapter", op, (bound,)),)), 10)
        return sorted(int(h.id.split(":")[1]) for h in hits)

    assert chapters("gte", 0) == [0, 2, 10, 10**10]
    assert chapters("lt", 0.5) == [-3, 0]
    assert chapters("gt", -0.0) == [2, 10, 10**10]
    assert chapters("lte", -4) == []
    index.delete(flt(ids=("chunk:2",), statuses=()))
    assert chapters("gte", 1) == [10, 10**10]


def test_settings_give_each_build_a_directory_of_its_own(tmp_path):
    index = TantivyKeywordIndex({"directory": str(tmp_path / "keyword-index")})
    options = TantivyKeywordIndex.build_options({"directory": str(tmp_path / "keyword-index")}, 3)
    assert options["directory"] == str(tmp_path / "keyword-index.b3")
    built = TantivyKeywordIndex(options)
    built.upsert([make_row("chunk:1", "in build three")])
    assert index.count(flt()) == 0 and built.count(flt()) == 1
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured):
        TantivyKeywordIndex({})
