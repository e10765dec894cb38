"""Opening SQLite files that several processes share (the database, the keyword index, the embedding cache).

WAL lets readers run beside the one writer. The mode is stored in the file, so only the first
opener switches it; later openers just confirm it. SQLite does not always apply busy_timeout to
`PRAGMA journal_mode` (an opener can meet another process recovering or closing the WAL and get
"database is locked" at once), so the switch is retried here until the connection's own timeout.
"""

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_RETRY_PAUSE = 0.02
_INHERITED: list[sqlite3.Connection] = []


def use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put `conn`'s database in WAL mode with synchronous=NORMAL, waiting out a transient lock."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(_RETRY_PAUSE)


@contextmanager
def transaction(conn: sqlite3.Connection, begin: str = "BEGIN IMMEDIATE") -> Iterator[sqlite3.Connection]:
    """`begin`, then COMMIT, or ROLLBACK on any exception. IMMEDIATE takes the write lock up front, so a
    concurrent writer waits on busy_timeout rather than failing with SQLITE_BUSY when it upgrades."""
    conn.execute(begin)
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:  # SQLite may already have rolled back (e.g. disk full)
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def busy(exc: BaseException) -> bool:
    """Whether `exc` is SQLite's "not now": another connection held the lock past busy_timeout."""
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


class ThreadConnections:
    """One connection per thread (sqlite3 connections must not be shared mid-transaction), opened by
    `connect` on first use. Not tracked elsewhere: when a thread ends, its connection is garbage-collected
    and closed. A connection inherited across fork (Celery prefork) is neither used nor closed in the
    child: closing could checkpoint or unlink the WAL under the parent's feet, so it is kept referenced,
    unused, and the child opens its own."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]):
        self._connect = connect
        self._local = threading.local()

    def get(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid != os.getpid():
            _INHERITED.append(conn)
            conn = None
        if conn is None:
            conn = self._connect()
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def close(self) -> None:
        """Close this thread's connection; other threads' go with the dropped thread-local."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local = threading.local()
