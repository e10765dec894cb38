"""What a process builds once and then shares: a loaded model, a tokenizer, a thread pool, a checksum.

One registry instead of a global and a lock in every module. `once(key, build)` returns what
`build()` returned the first time `key` was asked for in this process; callers arriving meanwhile
wait for that one build. Each key has a lock of its own, so a model converting for minutes holds up
nobody who asks for another key. A build that raises is not kept: the next call tries again.
Keys name their owner, e.g. ("retrieval.text", "jieba").
"""

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")

_built: dict[Hashable, object] = {}
_locks: dict[Hashable, threading.Lock] = {}
_guard = threading.Lock()  # around _locks only: a build never runs under it


def once(key: Hashable, build: Callable[[], T]) -> T:
    try:
        return _built[key]  # after the first build: one dict read, no lock
    except KeyError:
        pass
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _built:
            _built[key] = build()
        return _built[key]


def built(key: Hashable) -> bool:
    """Whether `key` has been built in this process (warm-up reports)."""
    return key in _built
