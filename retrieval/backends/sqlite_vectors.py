"""Vector index kept in one SQLite file and scored inside each process: the embedded default.

No server: every process (the web server, each worker) opens the file (WAL: readers never wait for
the one writer) and keeps, per partition, a numpy matrix of the partition's vectors with its rows'
filter fields, and scores a query exactly (a matrix product) with the filter applied before the
limit. A partition is (place, width, tenant, KB, kind); place is the shared table set or one
exclusive tenant's. Every write bumps, in its own transaction, a global sequence number and the
version of each partition it touched (rows carry the sequence number of their last write; a removed
row leaves a tombstone with it). Before each search a process reads the versions of the partitions
the filter can reach (one indexed query) and reads only what changed since the version it holds, in
one read transaction, so a write or delete of any process is seen by every process at its next
search. A process killed at any moment loses nothing: the file is the truth and a transaction is
whole or absent; the in-memory copies are caches of it.

The process's copies of the partitions, the filter and the scans are in vector_partitions.py.
"""

import dataclasses
import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from django.core.exceptions import ImproperlyConfigured

from common.sqlite import ThreadConnections, busy, transaction, use_wal
from retrieval.backends import check_top_k, clean_filter, clean_rows, matches_nothing
from retrieval.backends.base import Hit, IndexFilter, IndexRow
from retrieval.backends.coarse import GROWTH, Coarse
from retrieval.backends.vector_partitions import (
    Partition,
    build_coarse,
    rescored,
    row_matches,
    scan,
)


SHARED = -1  # the place of the shared table set; an exclusive tenant's place is its id
PAGE = 1000
CATCH_UP_PAGE = 20_000  # rows read into a partition's copy at a time
_NOT_STORED = {"id", "text", "vector"}  # every other IndexRow field is stored and filterable
# Defaults of the approximate path (OPTIONS approximate_rows, exact_rows, probe_share, candidates):
APPROXIMATE_ROWS = 50_000  # a partition this large gets an IVF
EXACT_ROWS = 20_000  # at most this many passing rows are scored exactly, whatever the partition's size
PROBE_SHARE = 0.1  # share of the lists read when every row passes (more when fewer pass: coarse.py)
CANDIDATES = 4  # the IVF proposes this many times top_k, rescored exactly
MAX_APPROXIMATE_K = 1000  # a longer answer (top_k -1: every row) is scored exactly

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vec_state (k INTEGER PRIMARY KEY CHECK (k = 0), seq INTEGER NOT NULL, "
    "epoch TEXT NOT NULL)",
    # AUTOINCREMENT: a pid or rid is never reused, so a process's cached copy can never mistake a
    # new partition or row for one it holds.
    "CREATE TABLE IF NOT EXISTS vec_parts (pid INTEGER PRIMARY KEY AUTOINCREMENT, place INTEGER NOT NULL, "
    "dim INTEGER NOT NULL, tenant_id INTEGER NOT NULL, kb_id INTEGER NOT NULL, kind TEXT NOT NULL, "
    "version INTEGER NOT NULL, UNIQUE (place, tenant_id, kb_id, dim, kind))",
    "CREATE TABLE IF NOT EXISTS vec_rows (rid INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, "
    "place INTEGER NOT NULL, dim INTEGER NOT NULL, pid INTEGER NOT NULL, seq INTEGER NOT NULL, "
    "document_id INTEGER NOT NULL, fields TEXT NOT NULL, vector BLOB NOT NULL, UNIQUE (place, id, dim))",
    "CREATE INDEX IF NOT EXISTS vec_rows_pid_seq ON vec_rows (pid, seq)",
    "CREATE INDEX IF NOT EXISTS vec_rows_pid ON vec_rows (pid)",  # (pid, rid): a partition's rows in pages
    "CREATE INDEX IF NOT EXISTS vec_rows_document ON vec_rows (place, document_id)",
    "CREATE TABLE IF NOT EXISTS vec_gone (pid INTEGER NOT NULL, seq INTEGER NOT NULL, rid INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS vec_gone_pid_seq ON vec_gone (pid, seq)",
)


class SqliteVectorIndex:
    """VectorIndex in a SQLite file, scored exactly in each process (numpy); see the module docstring."""

    thread_safe = True  # one connection per thread; partition copies behind their own locks

    # A file another writer held locked past busy_timeout: the next attempt may well get it.
    transient = staticmethod(busy)

    @staticmethod
    def build_options(options: dict, build: int) -> dict:
        """Build `build` is a file of its own beside the configured one (`vectors.b3.sqlite3`)."""
        path = Path(options.get("path") or "vectors.sqlite3")
        return {**options, "path": str(path.with_name(f"{path.stem}.b{int(build)}{path.suffix}"))}

    def __init__(self, options: dict):
        if not options.get("path"):
            raise ImproperlyConfigured("SqliteVectorIndex needs OPTIONS['path'].")
        self.path = Path(options["path"])
        self.timeout = float(options.get("timeout", 30))
        self._connections = ThreadConnections(self._connect)
        self._parts: dict[int, Partition] = {}
        self._epoch = ""
        self._lock = threading.Lock()
        # The approximate path (coarse.py): a partition of at least `approximate_rows` rows is
        # searched through its IVF when more than `exact_rows` of its rows pass the filter (fewer
        # are gathered and scored exactly); 0 turns it off. Measured in bench/RESULTS.md (issue 25).
        self.approximate_rows = int(options.get("approximate_rows", APPROXIMATE_ROWS))
        self.exact_rows = int(options.get("exact_rows", EXACT_ROWS))
        self.probe_share = float(options.get("probe_share", PROBE_SHARE))
        self.candidates = int(options.get("candidates", CANDIDATES))
        if min(self.approximate_rows, self.exact_rows, self.candidates - 1) < 0 or not 0 < self.probe_share <= 1:
            raise ImproperlyConfigured("SqliteVectorIndex: approximate_rows and exact_rows must be >= 0, "
                                       "candidates >= 1, probe_share in (0, 1].")
        # "background": the first search of a large partition starts the build and scans exactly
        # until it is done; "inline": that search builds it (tests, benchmarks).
        self.build_in = options.get("approximate_build", "background")
        if self.build_in not in ("background", "inline"):
            raise ImproperlyConfigured("SqliteVectorIndex: approximate_build is 'background' or 'inline'.")

    # --- connections and transactions
    def _conn(self) -> sqlite3.Connection:
        return self._connections.get()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        use_wal(conn, self.timeout)
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO vec_state (k, seq, epoch) VALUES (0, 0, ?)", (secrets.token_hex(8),))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.close()
            raise
        return conn

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[sqlite3.Connection]:
        # A write takes the lock up front; a read transaction is one snapshot of versions, rows and tombstones.
        with transaction(self._conn(), "BEGIN IMMEDIATE" if write else "BEGIN") as conn:
            yield conn

    def close(self) -> None:
        self._connections.close()

    def ping(self) -> None:
        self._conn().execute("SELECT seq FROM vec_state").fetchone()

    def preload(self) -> None:
        """Bring this process's copy of every partition up to date and build the IVF of each large
        one (a starting process warms up with it; searches meanwhile scan exactly)."""
        conn = self._conn()
        found = conn.execute("SELECT p.pid, p.version, p.dim, s.epoch FROM vec_parts AS p, vec_state AS s").fetchall()
        if not found:
            return
        with self._lock:
            if found[0][3] != self._epoch:
                self._parts, self._epoch = {}, found[0][3]
            parts = [(pid, self._parts.setdefault(pid, Partition(dim)), version) for pid, version, dim, _ in found]
        self._catch_up([(pid, part) for pid, part, version in parts if part.version < version])
        for _, part, _ in parts:
            self._prepare(part)

    def _prepare(self, part: Partition) -> None:
        """Build the partition's IVF in this thread if it needs one, holding its lock only to install it."""
        with part.lock:
            n = part.n - part.dead
            if (not self.approximate_rows or n < self.approximate_rows or part.building
                    or (part.coarse is not None and part.n <= GROWTH * part.coarse.trained_on)):
                return
            part.building = True
            job = (part, part.vectors, part.n, part.generation, part.log_end())
        build_coarse(*job, background=True)

    def is_empty(self) -> bool:
        """No row at all, of any place or width (retrieval/backends/index_upgrade.py asks)."""
        return self._conn().execute("SELECT 1 FROM vec_rows LIMIT 1").fetchone() is None

    # --- writes
    @staticmethod
    def _next_seq(conn) -> int:
        return conn.execute("UPDATE vec_state SET seq = seq + 1 RETURNING seq").fetchone()[0]

    @staticmethod
    def _pid(conn, place: int, dim: int, tenant_id: int, kb_id: int, kind: str, seq: int) -> int:
        return conn.execute(
            "INSERT INTO vec_parts (place, dim, tenant_id, kb_id, kind, version) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (place, tenant_id, kb_id, dim, kind) DO UPDATE SET version = excluded.version RETURNING pid",
            (place, dim, tenant_id, kb_id, kind, seq)).fetchone()[0]

    def upsert(self, rows: list[IndexRow], *, exclusive: bool = False) -> None:
        prepared = []
        for row in clean_rows(rows, need_vector=True):
            vector = _vector(row.vector)
            fields = {f.name: getattr(row, f.name) for f in dataclasses.fields(row) if f.name not in _NOT_STORED}
            prepared.append((row, vector, json.dumps(fields, ensure_ascii=False)))
        if not prepared:
            return
        with self._transaction(write=True) as conn:
            seq = self._next_seq(conn)
            pids: dict[tuple, int] = {}
            for row, vector, fields in prepared:
                place, dim = row.tenant_id if exclusive else SHARED, len(vector) // 4
                key = (place, dim, row.tenant_id, row.kb_id, row.kind)
                pid = pids.get(key) or pids.setdefault(key, self._pid(conn, *key, seq))
                old = conn.execute("SELECT rid, pid FROM vec_rows WHERE place = ? AND id = ? AND dim = ?",
                                   (place, row.id, dim)).fetchone()
                if old is None:
                    conn.execute("INSERT INTO vec_rows (id, place, dim, pid, seq, document_id, fields, vector) "
                                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                 (row.id, place, dim, pid, seq, row.document_id, fields, vector))
                    continue
                rid, old_pid = old
                if old_pid != pid:  # moved to another partition (KB or kind changed): gone from the old one
                    conn.execute("INSERT INTO vec_gone (pid, seq, rid) VALUES (?, ?, ?)", (old_pid, seq, rid))
                    conn.execute("UPDATE vec_parts SET version = ? WHERE pid = ?", (seq, old_pid))
                conn.execute("UPDATE vec_rows SET pid = ?, seq = ?, document_id = ?, fields = ?, vector = ? "
                             "WHERE rid = ?", (pid, seq, row.document_id, fields, vector, rid))

    @staticmethod
    def _pids(conn, flt: IndexFilter) -> list[int]:
        """The partitions (any width) the clean filter reaches."""
        sql = "SELECT pid FROM vec_parts WHERE place = ? AND tenant_id = ? AND kb_id IN (SELECT value FROM json_each(?))"
        params: list = [flt.tenant_id if flt.exclusive else SHARED, flt.tenant_id, json.dumps(list(flt.kb_ids))]
        if flt.kinds:
            sql += " AND kind IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(flt.kinds)))
        return [pid for (pid,) in conn.execute(sql + " ORDER BY pid", params)]

    def _matching(self, conn, flt: IndexFilter) -> Iterator[tuple]:
        """(rid, id, pid) of every stored row the clean filter matches, any width."""
        for rid, id_, pid, matched in self._rows(conn, flt):
            if matched:
                yield rid, id_, pid

    def _rows(self, conn, flt: IndexFilter, pids: list[int] | None = None, after: int = 0,
              limit: int = -1) -> Iterator[tuple]:
        """(rid, id, pid, matches the filter) of the stored rows of `pids` (default: every partition
        the clean filter reaches) past rid `after` that SQL narrows to, at most `limit` (-1: all);
        by rid when there is one partition."""
        place = flt.tenant_id if flt.exclusive else SHARED
        pids = self._pids(conn, flt) if pids is None else pids
        if not pids:
            return
        # The partitions drive the scan (index on pid, rid), unless ids or documents pick fewer rows.
        sql = "SELECT r.rid, r.id, r.pid, r.fields FROM vec_rows AS r WHERE r.pid IN (SELECT value FROM json_each(?)) AND r.rid > ?"
        params: list = [json.dumps(pids), after]
        if flt.document_ids or flt.ids:  # lets the (place, id) or (place, document_id) index pick the rows
            sql += " AND r.place = ?"
            params.append(place)
        if flt.document_ids:
            sql += " AND r.document_id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(flt.document_ids)))
        if flt.ids:
            sql += " AND r.id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(flt.ids)))
        sql += " ORDER BY r.rid LIMIT ?" if len(pids) == 1 else " LIMIT ?"
        for rid, id_, pid, fields in conn.execute(sql, [*params, limit]):
            values = json.loads(fields)
            values["id"] = id_
            yield rid, id_, pid, row_matches(values, flt)

    def delete(self, flt: IndexFilter) -> int:
        flt = clean_filter(flt)
        if matches_nothing(flt):
            return 0
        with self._transaction(write=True) as conn:
            doomed = list(self._matching(conn, flt))
            if not doomed:
                return 0
            seq = self._next_seq(conn)
            conn.execute("DELETE FROM vec_rows WHERE rid IN (SELECT value FROM json_each(?))",
                         (json.dumps([rid for rid, _, _ in doomed]),))
            conn.executemany("INSERT INTO vec_gone (pid, seq, rid) VALUES (?, ?, ?)",
                             [(pid, seq, rid) for rid, _, pid in doomed])
            conn.executemany("UPDATE vec_parts SET version = ? WHERE pid = ?", [(seq, pid) for pid in
                                                                                 {pid for _, _, pid in doomed}])
            return len(doomed)

    def drop_all(self) -> None:
        # Rows go, the sequence and AUTOINCREMENT counters stay: no pid or rid is ever reused, and a
        # new epoch tells every process's copies that they are of rows no longer there.
        with self._transaction(write=True) as conn:
            for table in ("vec_rows", "vec_gone", "vec_parts"):
                conn.execute(f"DELETE FROM {table}")
            conn.execute("UPDATE vec_state SET epoch = ?", (secrets.token_hex(8),))
        with self._lock:
            self._parts = {}

    # --- reads
    def count(self, flt: IndexFilter) -> int:
        flt = clean_filter(flt)
        if matches_nothing(flt):
            return 0
        with self._transaction(write=False) as conn:
            return sum(1 for _ in self._matching(conn, flt))

    def ids(self, flt: IndexFilter) -> Iterator[str]:
        flt = clean_filter(flt)
        return iter(()) if matches_nothing(flt) else self._ids(flt)

    def _ids(self, flt: IndexFilter) -> Iterator[str]:
        with self._transaction(write=False) as conn:
            pids = self._pids(conn, flt)
        for pid in pids:  # keyset pages of each partition: no read transaction stays open between pages
            after = 0
            while True:
                with self._transaction(write=False) as conn:
                    rows = list(self._rows(conn, flt, [pid], after, PAGE))
                yield from (id_ for _, id_, _, matched in rows if matched)
                if len(rows) < PAGE:
                    break
                after = rows[-1][0]

    def _fresh(self, flt: IndexFilter, dim: int) -> list[Partition]:
        """This process's copies of the partitions the filter reaches, brought up to date."""
        place = flt.tenant_id if flt.exclusive else SHARED
        sql = ("SELECT p.pid, p.version, s.epoch FROM vec_parts AS p, vec_state AS s WHERE p.place = ? "
               "AND p.dim = ? AND p.tenant_id = ? AND p.kb_id IN (SELECT value FROM json_each(?))")
        params: list = [place, dim, flt.tenant_id, json.dumps(list(flt.kb_ids))]
        if flt.kinds:
            sql += " AND p.kind IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(flt.kinds)))
        conn = self._conn()
        found = conn.execute(sql, params).fetchall()
        if not found:
            return []
        epoch = found[0][2]
        with self._lock:
            if epoch != self._epoch:
                self._parts, self._epoch = {}, epoch
            parts = [(self._parts.setdefault(pid, Partition(dim)), version) for pid, version, _ in found]
        stale = [(pid, part) for (pid, _, _), (part, version) in zip(found, parts) if part.version < version]
        if stale:
            self._catch_up(stale)
        return [part for part, _ in parts]

    def _catch_up(self, stale: list[tuple[int, Partition]]) -> None:
        for pid, part in stale:
            with part.lock:
                # One snapshot: the version, the rows written since the copy's and the tombstones since.
                with self._transaction(write=False) as conn:
                    row = conn.execute("SELECT version FROM vec_parts WHERE pid = ?", (pid,)).fetchone()
                    if row is None or row[0] <= part.version:
                        continue
                    gone = [rid for (rid,) in conn.execute(
                        "SELECT rid FROM vec_gone WHERE pid = ? AND seq > ?", (pid, part.version))]
                    cursor = conn.execute("SELECT rid, id, fields, vector FROM vec_rows WHERE pid = ? AND seq > ?",
                                          (pid, part.version))
                    # In pages: a million-row partition is never held twice (fetched rows and arrays).
                    while rows := cursor.fetchmany(CATCH_UP_PAGE):
                        part.apply(gone, rows, part.version)
                        gone = []
                    part.apply(gone, [], row[0])

    def _coarse(self, part: Partition, n: int) -> Coarse | None:
        """The partition's IVF, brought up to date, when it is large enough to have one (its build
        started here when it has none or has outgrown its lists); under the partition's lock."""
        if not self.approximate_rows or n < self.approximate_rows:
            return None
        if (part.coarse is None or n > GROWTH * part.coarse.trained_on) and not part.building:
            part.building = True
            job = (part, part.vectors, n, part.generation, part.log_end())
            if self.build_in == "inline":
                build_coarse(*job)
            else:
                threading.Thread(target=build_coarse, args=job, kwargs={"background": True}, daemon=True, name="loci-ivf-build").start()
        if part.coarse is not None:
            part.sync(part.coarse)
        return part.coarse

    def search(self, vector: list[float], flt: IndexFilter, top_k: int, min_score: float | None = None) -> list[Hit]:
        return self.search_many([vector], flt, top_k, min_score)[0]

    def search_many(self, vectors: list[list[float]], flt: IndexFilter, top_k: int,
                    min_score: float | None = None) -> list[list[Hit]]:
        flt, limit = clean_filter(flt), check_top_k(top_k)
        queries = [np.frombuffer(_vector(v), dtype=np.float32) for v in vectors]
        if not queries:
            return []
        if matches_nothing(flt) or len({len(q) for q in queries}) != 1:
            if len({len(q) for q in queries}) > 1:  # several widths: each its own search
                return [self.search_many([v], flt, top_k, min_score)[0] for v in vectors]
            return [[] for _ in queries]
        matrix = np.stack(queries)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms == 0, 1.0, norms)
        found: list[list[tuple[float, str, dict]]] = [[] for _ in queries]
        for part in self._fresh(flt, matrix.shape[1]):
            with part.lock:
                view = part.view()
                coarse = self._coarse(part, view.n)
            # Scored without the lock: numpy releases the GIL, so searches of one partition run side by side.
            mask = view.select(flt)
            passing = int(np.count_nonzero(mask))
            if not passing:
                continue
            if coarse is not None and passing > self.exact_rows and limit <= MAX_APPROXIMATE_K:
                # A large partition, many rows passing: the IVF proposes, the float rows score.
                proposed = coarse.candidates(matrix, mask, passing, min(passing, limit * self.candidates),
                                             self.probe_share)
                # The lists read must hold a full answer; when they do not (rows that all collapse
                # onto one point, a filter whose rows sit in lists far from the query) the exact
                # scan below answers instead.
                if int((proposed >= 0).sum(axis=1).min()) >= min(limit, passing):
                    for q in range(len(queries)):
                        found[q] += rescored(view, proposed[q], matrix[q], limit, min_score)
                    continue
            if passing > view.n // 4 or passing > self.exact_rows:  # one scan of the block, the filter inside it
                for q, (scores, slots) in enumerate(scan(view.vectors[:view.n], matrix, mask, min(limit, passing))):
                    keep = slots >= 0 if min_score is None else (slots >= 0) & (scores >= min_score)
                    kept = slots[keep]
                    found[q] += zip(scores[keep].tolist(), [view.ids[sl] for sl in kept.tolist()], view.extras(kept))
                continue
            slots = np.flatnonzero(mask)  # a few rows: gathered, then one product
            scores = view.vectors[slots] @ matrix.T
            for q in range(len(queries)):
                column = scores[:, q]
                k = min(limit, len(column))
                top = np.argpartition(-column, k - 1)[:k] if k < len(column) else np.arange(len(column))
                if min_score is not None:
                    top = top[column[top] >= min_score]
                picked = slots[top]
                found[q] += zip(column[top].tolist(), [view.ids[sl] for sl in picked.tolist()], view.extras(picked))
        out = []
        for candidates in found:
            candidates.sort(key=lambda c: (-c[0], c[1]))
            out.append([Hit(id=id_, score=score, extra=extra) for score, id_, extra in candidates[:limit]])
        return out

def _vector(vector) -> bytes:
    """The vector as float32 bytes; ValueError for anything but a non-empty sequence of numbers."""
    if isinstance(vector, (str, bytes)) or not hasattr(vector, "__len__") or not len(vector):
        raise ValueError("vector must be a non-empty sequence of floats")
    try:
        array = np.asarray(vector, dtype=np.float32).ravel()
    except (TypeError, ValueError):
        raise ValueError("vector must be a non-empty sequence of floats") from None
    if not np.all(np.isfinite(array)):
        raise ValueError("vector must hold finite numbers")
    return array.tobytes()
