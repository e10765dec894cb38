"""Every SQLite file Loci shares between processes ends in WAL mode, even when another process holds a lock."""

import sqlite3
import subprocess
import sys
import threading

import pytest

from common.sqlite import use_wal
from tests.worker_process import REPO, app_env


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


def test_a_new_database_file_and_keyword_index_are_in_wal_mode(tmp_path):
    """As a fresh checkout's first process opens them: the database and the FTS5 index under var/."""
    script = (
        "import django; django.setup()\n"
        "from django.db import connection\n"
        "from retrieval.backends import keyword_index\n"
        "print(connection.cursor().execute('PRAGMA journal_mode').fetchone()[0])\n"
        "print(keyword_index()._conn().execute('PRAGMA journal_mode').fetchone()[0])\n"
    )
    # FTS5 chosen by name: the default keyword index is tantivy's directory, which has no journal.
    env = app_env(tmp_path, LOCI_KEYWORD_BACKEND="retrieval.backends.sqlite_fts.SqliteKeywordIndex")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["wal", "wal"]
