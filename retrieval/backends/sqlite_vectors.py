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

The filter is evaluated from IndexFilter's own fields (`_predicates`), not from a list written
here, so a field added to IndexRow and IndexFilter (a scope field; a dict of metadata) narrows here
with no change: a tuple field `xs`/`x_ids` narrows row field `x`/`x_id` to its members (empty: no
narrowing; kb_ids always narrows), a scalar field narrows to equality unless None, a dict field
narrows to rows whose same-named dict holds each of its key/value pairs. Each row's fields are
stored as JSON beside its vector; each partition's copy holds each field as codes of its distinct
values, so a predicate is evaluated once per distinct value and the rows are narrowed by a
membership test on integer codes.
"""

import dataclasses
import json
import logging
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
from django.core.exceptions import ImproperlyConfigured

from common.sqlite import ThreadConnections, busy, transaction, use_wal
from retrieval.backends import check_top_k, clean_filter, clean_rows, matches_nothing
from retrieval.backends.base import Hit, IndexFilter, IndexRow, metadata_holds

logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # which SIMD build it tries is no news
import faiss  # noqa: E402  (after quieting its loader's log)

from retrieval.backends.coarse import GROWTH, Coarse  # noqa: E402  (imports faiss too)

# One thread per search: the search pools run several at once, and a query's scan is memory-bound.
faiss.omp_set_num_threads(1)

SHARED = -1  # the place of the shared table set; an exclusive tenant's place is its id
PAGE = 1000
CATCH_UP_PAGE = 20_000  # rows read into a partition's copy at a time
HIT_FIELDS = ("kind", "kb_id", "document_id", "parent_id")
_NOT_STORED = {"id", "text", "vector"}  # every other IndexRow field is stored and filterable
_PARTITION = ("tenant_id", "kb_id", "kind")  # narrowed in SQL through the partition table
_COMPACT_SHARE = 0.25  # rebuild a partition's arrays once this share of their slots is dead
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


# --- the filter, derived from IndexFilter's fields


def _column(name: str) -> str:
    """The IndexRow field a tuple-valued IndexFilter field narrows: kb_ids -> kb_id, statuses -> status."""
    if name == "ids":
        return "id"
    if name.endswith("_ids"):
        return name[:-1]
    if name.endswith("ses"):
        return name[:-2]
    return name.removesuffix("s")


def _contains(want: dict) -> Callable:
    return lambda value: isinstance(value, dict) and all(k in value and value[k] == v for k, v in want.items())


def _metadata_test(conditions: tuple) -> Callable:
    return lambda value: all(metadata_holds(value, c) for c in conditions)


def _predicates(flt: IndexFilter) -> tuple[list[tuple[str, Callable]], tuple[str, ...], tuple[str, ...]]:
    """([(row field, test of one value)], ids, or_ids) for a clean filter: every row must pass every
    test, have its id in `ids` when given, and when `or_ids` is given pass the parent test OR have
    its id in `or_ids` (the parent test is then left out of the list and applied with it)."""
    tests: list[tuple[str, Callable]] = []
    for f in dataclasses.fields(flt):
        name, value = f.name, getattr(flt, f.name)
        if name in ("exclusive", "ids", "or_ids") or (name == "parent_ids" and flt.or_ids):
            continue
        if name == "metadata":  # conditions on the row's metadata map, every one must hold
            if value:
                tests.append(("metadata", _metadata_test(value)))
            continue
        if isinstance(value, tuple):
            if value or name == "kb_ids":
                tests.append((_column(name), _In(value)))
        elif isinstance(value, dict):
            if value:
                tests.append((name, _contains(value)))
        elif value is not None:
            tests.append((name, value.__eq__))
    return tests, flt.ids, flt.or_ids


def row_matches(fields: dict, flt: IndexFilter) -> bool:
    """The filter on one stored row (its fields with "id")."""
    tests, ids, or_ids = _predicates(flt)
    if not all(test(fields.get(column)) is True for column, test in tests):
        return False
    if ids and fields["id"] not in ids:
        return False
    if or_ids:
        parents = flt.parent_ids
        return fields["id"] in or_ids or (bool(parents) and fields.get("parent_id") in parents)
    return True


def _key(value):
    """A hashable key for a field value (dicts and lists by their JSON)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value


# --- one partition's copy in this process


class _Column:
    """One field of a partition's rows as codes of its distinct values."""

    __slots__ = ("code_of", "codes", "values")

    def __init__(self, cap: int):
        self.codes = np.full(cap, -1, dtype=np.int32)
        self.values: list = []
        self.code_of: dict = {}

    def code(self, value) -> int:
        key = _key(value)
        code = self.code_of.get(key)
        if code is None:
            code = self.code_of[key] = len(self.values)
            self.values.append(value)
        return code


class _In:
    """The test "the value is one of these" (a tuple filter field), whose members a partition's
    column looks up among its codes: one dict lookup per member, not a call per distinct value (a
    parent filter over a million facts has a hundred thousand distinct parents)."""

    __slots__ = ("members",)

    def __init__(self, members):
        self.members = frozenset(members)

    def __call__(self, value) -> bool:
        return value in self.members


def _mask(codes: np.ndarray, values: list, code_of: dict, test: Callable, n: int) -> np.ndarray:
    """Which of the first `n` rows hold a value passing `test` (evaluated once per distinct value,
    or looked up per member for an _In)."""
    count = len(values)  # a catch-up may append values meanwhile: codes past it are not looked at
    if isinstance(test, _In) and len(test.members) < count:
        wanted = sorted({code for code in (code_of.get(_key(m)) for m in test.members)
                         if code is not None and code < count})
    else:
        wanted = [code for code, value in enumerate(values[:count]) if test(value) is True]
    if not wanted:
        return np.zeros(n, dtype=bool)
    if len(wanted) == count:
        return codes[:n] >= 0
    if len(wanted) == 1:
        return codes[:n] == wanted[0]
    # A lookup table read at each row's code (one pass; np.isin makes one per wanted code). Its
    # last entry stays False: a row without the field holds code -1, and a row rewritten meanwhile
    # with a value appended since `count` was read holds `count` (left out) or more (np.isin then).
    table = np.zeros(count + 1, dtype=bool)
    table[wanted] = True
    try:
        return table[codes[:n]]
    except IndexError:
        return np.isin(codes[:n], np.asarray(wanted, dtype=np.int32))


class _Partition:
    """The live rows of one partition: unit vectors, ids, rids, fields; dead slots until compacted."""

    def __init__(self, dim: int):
        self.dim, self.version, self.n, self.dead = dim, 0, 0, 0
        self.lock = threading.Lock()
        self._alloc(64)
        self.ids: list[str] = []
        self.slot_of: dict[int, int] = {}  # rid -> slot
        self.slot_of_id: dict[str, int] = {}
        self.columns: dict[str, _Column] = {}
        # The approximate index (coarse.py), once the partition is large: the slots each catch-up
        # wrote are logged (while an index exists or is being built) for it to add at the next search.
        self.coarse: Coarse | None = None
        self.building = False
        self.generation = 0  # bumped when compaction renumbers the slots: an index built before is void
        self.log: list[np.ndarray] = []
        self.log_base = 0  # log position of log[0]

    def _alloc(self, cap: int) -> None:
        self.vectors = np.zeros((cap, self.dim), dtype=np.float32)
        self.alive = np.zeros(cap, dtype=bool)

    def _grow(self, need: int) -> None:
        cap = len(self.alive)
        if need <= cap:
            return
        new = max(need, cap * 2)
        vectors, alive = self.vectors, self.alive
        self._alloc(new)
        self.vectors[:cap], self.alive[:cap] = vectors, alive
        for col in self.columns.values():
            codes = col.codes
            col.codes = np.full(new, -1, dtype=np.int32)
            col.codes[:cap] = codes

    def apply(self, gone: list[int], rows: list[tuple], version: int) -> None:
        """Tombstones first, then the rows as they are now (a rid in both was removed and came back)."""
        for rid in gone:
            slot = self.slot_of.pop(rid, None)
            if slot is not None:
                self.alive[slot] = False
                self.slot_of_id.pop(self.ids[slot], None)
                self.dead += 1
        self._grow(self.n + len(rows))
        if rows:
            slots = np.empty(len(rows), dtype=np.int64)
            for i, (rid, id_, _, _) in enumerate(rows):
                slot = self.slot_of.get(rid)
                if slot is None:
                    slot, self.n = self.n, self.n + 1
                    self.ids.append(id_)
                    self.slot_of[rid] = slot
                self.slot_of_id[id_] = slot
                slots[i] = slot
            # In bulk: one buffer, one normalisation, one scatter per field.
            matrix = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), self.dim)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            self.vectors[slots] = matrix / np.where(norms == 0, 1.0, norms)
            self.alive[slots] = True
            if self.coarse is not None or self.building:
                self.log.append(slots)
            fields = [json.loads(r[2]) for r in rows]
            for name in {name for row in fields for name in row}:
                col = self.columns.get(name)
                if col is None:
                    col = self.columns[name] = _Column(len(self.alive))
                if name in _PARTITION:  # the same in every row of a partition
                    col.codes[slots] = col.code(fields[0].get(name))
                    continue
                code_of, code = col.code_of, col.code
                col.codes[slots] = [code_of.get(v) if v.__class__ in (str, int) and v in code_of else code(v)
                                    for v in (row.get(name) for row in fields)]
        self.version = version
        if self.dead > 1000 and self.dead > _COMPACT_SHARE * self.n:
            self._compact()

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive[:self.n])
        ids = [self.ids[s] for s in keep]
        rid_of_slot = {slot: rid for rid, slot in self.slot_of.items()}
        vectors = self.vectors[keep]
        columns = {name: col.codes[keep] for name, col in self.columns.items()}
        cap = max(64, len(keep) * 2)
        self._alloc(cap)
        self.vectors[:len(keep)], self.alive[:len(keep)] = vectors, True
        for name, col in self.columns.items():
            col.codes = np.full(cap, -1, dtype=np.int32)
            col.codes[:len(keep)] = columns[name]
        self.ids, self.n, self.dead = ids, len(keep), 0
        self.slot_of = {rid_of_slot[s]: new for new, s in enumerate(keep)}
        self.slot_of_id = {id_: slot for slot, id_ in enumerate(ids)}
        self.coarse, self.log, self.log_base, self.generation = None, [], 0, self.generation + 1

    def log_end(self) -> int:
        return self.log_base + len(self.log)

    def sync(self, coarse: Coarse) -> None:
        """Add to `coarse` the rows written since it was last synced (under the partition's lock)."""
        end = self.log_end()
        if coarse.synced < end:
            slots = np.unique(np.concatenate(self.log[coarse.synced - self.log_base:]))
            coarse.add(self.vectors[slots], slots)
            coarse.synced = end
        if not self.building and coarse is self.coarse:  # nobody needs the log before this point
            self.log, self.log_base = [], end

    def view(self) -> "_View":
        """What a search reads, taken under the partition's lock and read without it: a catch-up
        replaces the arrays it grows or compacts (the view keeps the old ones) and appends to the
        lists (the view reads only its first n); a row rewritten in place meanwhile is a concurrent write."""
        return _View(self.n, self.vectors, self.alive, self.ids, self.slot_of_id,
                     {name: (col.codes, col.values, col.code_of) for name, col in self.columns.items()})


class _View:
    __slots__ = ("alive", "columns", "ids", "n", "slot_of_id", "vectors")

    def __init__(self, n, vectors, alive, ids, slot_of_id, columns):
        self.n, self.vectors, self.alive, self.ids, self.slot_of_id, self.columns = (
            n, vectors, alive, ids, slot_of_id, columns)

    def _slots(self, ids) -> list[int]:
        return [s for s in map(self.slot_of_id.get, ids) if s is not None and s < self.n]

    def select(self, flt: IndexFilter) -> np.ndarray:
        """Which of the first n slots hold a live row the filter lets through (tenant, KB and kind are the partition's)."""
        tests, ids, or_ids = _predicates(flt)
        n = self.n
        mask = self.alive[:n].copy()
        if ids:  # a few picked rows: everything else is out before any column is read
            picked = np.zeros(n, dtype=bool)
            picked[self._slots(ids)] = True
            mask &= picked
        for column, test in tests:
            if column in _PARTITION:
                continue
            if column not in self.columns:  # a field no row of this partition has: only a None test passes
                if test(None) is not True:
                    return np.zeros(n, dtype=bool)
                continue
            mask &= _mask(*self.columns[column], test, n)
        if or_ids:
            either = np.zeros(n, dtype=bool)
            either[self._slots(or_ids)] = True
            if flt.parent_ids and "parent_id" in self.columns:
                either |= _mask(*self.columns["parent_id"], _In(flt.parent_ids), n)
            mask &= either
        return mask

    def extra(self, slot: int) -> dict:
        return {name: self.columns[name][1][self.columns[name][0][slot]] for name in HIT_FIELDS}


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
        self._parts: dict[int, _Partition] = {}
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
            parts = [(pid, self._parts.setdefault(pid, _Partition(dim)), version) for pid, version, dim, _ in found]
        self._catch_up([(pid, part) for pid, part, version in parts if part.version < version])
        for _, part, _ in parts:
            self._prepare(part)

    def _prepare(self, part: _Partition) -> None:
        """Build the partition's IVF in this thread if it needs one, holding its lock only to install it."""
        with part.lock:
            n = part.n - part.dead
            if (not self.approximate_rows or n < self.approximate_rows or part.building
                    or (part.coarse is not None and part.n <= GROWTH * part.coarse.trained_on)):
                return
            part.building = True
            job = (part, part.vectors, part.n, part.generation, part.log_end())
        _build(*job, background=True)

    def is_empty(self) -> bool:
        """No row at all, of any place or width (retrieval/index_upgrade.py asks)."""
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

    def _fresh(self, flt: IndexFilter, dim: int) -> list[_Partition]:
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
            parts = [(self._parts.setdefault(pid, _Partition(dim)), version) for pid, version, _ in found]
        stale = [(pid, part) for (pid, _, _), (part, version) in zip(found, parts) if part.version < version]
        if stale:
            self._catch_up(stale)
        return [part for part, _ in parts]

    def _catch_up(self, stale: list[tuple[int, _Partition]]) -> None:
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

    def _coarse(self, part: _Partition, n: int) -> Coarse | None:
        """The partition's IVF, brought up to date, when it is large enough to have one (its build
        started here when it has none or has outgrown its lists); under the partition's lock."""
        if not self.approximate_rows or n < self.approximate_rows:
            return None
        if (part.coarse is None or n > GROWTH * part.coarse.trained_on) and not part.building:
            part.building = True
            job = (part, part.vectors, n, part.generation, part.log_end())
            if self.build_in == "inline":
                _build(*job)
            else:
                threading.Thread(target=_build, args=job, kwargs={"background": True}, daemon=True, name="loci-ivf-build").start()
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
                        found[q] += _rescored(view, proposed[q], matrix[q], limit, min_score)
                    continue
            if passing > view.n // 4 or passing > self.exact_rows:  # one scan of the block, the filter inside it
                for q, (scores, slots) in enumerate(_scan(view.vectors[:view.n], matrix, mask, min(limit, passing))):
                    keep = slots >= 0 if min_score is None else (slots >= 0) & (scores >= min_score)
                    found[q] += [(float(sc), view.ids[sl], view.extra(int(sl))) for sc, sl in zip(scores[keep],
                                                                                                 slots[keep])]
                continue
            slots = np.flatnonzero(mask)  # a few rows: gathered, then one product
            scores = view.vectors[slots] @ matrix.T
            for q in range(len(queries)):
                column = scores[:, q]
                k = min(limit, len(column))
                top = np.argpartition(-column, k - 1)[:k] if k < len(column) else np.arange(len(column))
                if min_score is not None:
                    top = top[column[top] >= min_score]
                found[q] += [(float(column[i]), view.ids[slots[i]], view.extra(int(slots[i]))) for i in top]
        out = []
        for candidates in found:
            candidates.sort(key=lambda c: (-c[0], c[1]))
            out.append([Hit(id=id_, score=score, extra=extra) for score, id_, extra in candidates[:limit]])
        return out

def _build(part: _Partition, vectors: np.ndarray, n: int, generation: int, log_end: int, *,
           background: bool = False) -> None:
    """Build the partition's IVF over its first n slots as `vectors` holds them when the build
    started at write-log position `log_end` (what is written later is in the log, added at the next
    sync). Inline the caller holds the partition's lock; in the background it is taken to install."""
    lock = part.lock if background else nullcontext()
    try:
        coarse = Coarse.build(vectors[:n])
    except Exception:
        with lock:
            part.building = False
        if not background:
            raise
        logging.getLogger(__name__).exception("building the approximate index of a partition failed")
        return
    with lock:
        coarse.synced = log_end
        part.building = False
        if part.generation == generation:  # the slots were not renumbered meanwhile
            part.coarse = coarse


def _rescored(view: "_View", slots: np.ndarray, query: np.ndarray, limit: int,
              min_score: float | None) -> list[tuple[float, str, dict]]:
    """The best `limit` of the proposed slots by their exact inner product with the query."""
    slots = np.unique(slots[slots >= 0])  # a rewritten row may be proposed twice (old and new code)
    scores = view.vectors[slots] @ query
    if len(slots) > limit:
        top = np.argpartition(-scores, limit - 1)[:limit]
        slots, scores = slots[top], scores[top]
    if min_score is not None:
        keep = scores >= min_score
        slots, scores = slots[keep], scores[keep]
    return [(float(sc), view.ids[sl], view.extra(int(sl))) for sc, sl in zip(scores, slots)]


def _scan(block: np.ndarray, queries: np.ndarray, mask: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Exact top-k inner products of each query over the block's rows that `mask` lets through:
    faiss's brute-force kernel with an IDSelectorBitmap, so the filter applies inside the scan and
    no score array is written (2.1x numpy's matrix product + argpartition over 90,000 x 384 rows,
    bench/RESULTS.md). (scores, slots) per query, best first; slot -1 pads a short answer."""
    n, dim = block.shape
    bits = np.packbits(mask, bitorder="little")  # referenced until the call returns
    selector = faiss.IDSelectorBitmap(n, faiss.swig_ptr(bits))
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    block = np.ascontiguousarray(block)
    scores = np.empty((len(queries), k), dtype=np.float32)
    slots = np.empty((len(queries), k), dtype=np.int64)
    faiss.knn_inner_product(faiss.swig_ptr(queries), faiss.swig_ptr(block), dim, len(queries), n, k,
                            faiss.swig_ptr(scores), faiss.swig_ptr(slots), selector)
    return list(zip(scores, slots))


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
