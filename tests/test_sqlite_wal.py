"""Every SQLite file Loci shares between processes ends in WAL mode, even when another process holds a lock."""

import sqlite3
import threading

import pytest
from django.db import connection

from loci.sqlite import use_wal


def test_switching_to_wal_waits_for_another_process_lock_instead_of_failing(tmp_path):
    path = tmp_path / "shared.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")  # as a writer in another process would, mid-transaction
    threading.Timer(0.3, lambda: holder.execute("COMMIT")).start()

    opener = sqlite3.connect(path, timeout=0, isolation_level=None)
    use_wal(opener, timeout=5)

    assert opener.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert opener.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_a_lock_that_outlasts_the_timeout_still_raises(tmp_path):
    path = tmp_path / "shared.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    opener = sqlite3.connect(path, timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        use_wal(opener, timeout=0.2)
    holder.execute("COMMIT")


@pytest.mark.django_db
def test_the_database_connection_is_in_wal_mode_when_it_is_a_file():
    if connection.vendor != "sqlite":
        pytest.skip("the database is not SQLite")
    mode = connection.cursor().execute("PRAGMA journal_mode").fetchone()[0]
    # The test database may be in memory ("memory" is SQLite's only mode there); a file is WAL.
    assert mode == ("memory" if connection.is_in_memory_db() else "wal")
