"""The CPU deadline of the search call running in this thread, for engines that can stop mid-query.

Set by retrieval/search/engines.py around each leaf call of a search with a CPU budget; read by the
SQLite keyword index's progress handler, which interrupts a query once the thread's CPU time
(`time.thread_time()`) passes it. Elsewhere (writes, reindex, a search without a budget) it is None.
"""

import threading

_local = threading.local()


def get() -> float | None:
    return getattr(_local, "deadline", None)


def set(deadline: float | None) -> None:
    _local.deadline = deadline
