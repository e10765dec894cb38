"""common.once: what a process builds once (a model, a pool) is built once however many threads ask,
a failed build is tried again, and a slow build of one thing holds up nobody who asks for another."""

import threading

import pytest

from common.once import built, once


def test_concurrent_first_callers_share_one_build():
    builds, start = [], threading.Barrier(8)

    def build():
        builds.append(1)
        return object()

    got = []

    def ask():
        start.wait()
        got.append(once(("tests.once", "shared"), build))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(builds) == 1 and len(got) == 8 and all(g is got[0] for g in got)
    assert built(("tests.once", "shared"))


def test_a_build_that_fails_is_tried_again():
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("the model file is not there yet")
        return "loaded"

    with pytest.raises(OSError):
        once(("tests.once", "flaky"), flaky)
    assert not built(("tests.once", "flaky"))
    assert once(("tests.once", "flaky"), flaky) == "loaded" and len(attempts) == 2


def test_a_slow_build_holds_up_only_its_own_key():
    started, release = threading.Event(), threading.Event()

    def slow():
        started.set()
        release.wait(10)
        return "slow"

    worker = threading.Thread(target=once, args=(("tests.once", "slow"), slow))
    worker.start()
    try:
        assert started.wait(10)
        assert once(("tests.once", "quick"), lambda: "quick") == "quick"  # returns while "slow" builds
    finally:
        release.set()
        worker.join(10)
    assert once(("tests.once", "slow"), lambda: "again") == "slow"
