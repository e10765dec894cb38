"""BM25 keyword index in one SQLite FTS5 file: the embedded default.

Layout per table set (shared: `kw2_meta` + `kw2_fts`; an exclusive tenant: `kw2_t<id>_meta` +
`kw2_t<id>_fts`; 2 is `retrieval.text.ANALYZER_GENERATION`): the FTS5 table holds only the
pre-segmented text, and an ordinary table joined on rowid holds the filterable fields with B-tree
indexes. Filters are SQL conditions on that table in the same statement as MATCH, so they apply
before ORDER BY ... LIMIT, and deletes by document or knowledge base use an index instead of
scanning FTS columns. Every value is a bound parameter; table names are built only from a
validated int.
"""

import json
import re
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from django.core.exceptions import ImproperlyConfigured

from common.sqlite import ThreadConnections, busy, transaction, use_wal
from retrieval.backends import check_query, check_top_k, clean_filter, clean_rows, cpu_deadline, matches_nothing
from retrieval.backends.base import SCOPE_FIELDS, Hit, IndexFilter, IndexRow
from retrieval.text import ANALYZER_GENERATION, index_terms, segment

# Characters jieba-free tokens keep inside a word (c++, c#, node.js, at&t, 50%, foo_bar, e-mail):
# unicode61 must not split on them, or "c++" would be stored and matched as "c".
TOKENIZE = "unicode61 tokenchars '+#.-_&%'"
MAX_QUERY_TERMS = 64  # a pasted page as query: the first 64 distinct terms rank well enough
IN_LIST_INLINE = 200  # longer value lists are passed as one JSON parameter (SQLite caps bound variables)
PAGE = 1000
_FILTER_COLUMNS = {  # IndexFilter field -> column; the only names that ever reach the SQL text
    "kb_ids": "kb_id", "kinds": "kind", "document_ids": "document_id", "parent_ids": "parent_id",
    "ids": "id", "statuses": "status",
}
_PREFIX = f"kw{ANALYZER_GENERATION}"
_TABLE_RE = re.compile(r"^kw\d*_(?:t\d+_)?(?:meta|fts)$")  # this generation's tables and older ones


def table_names(tenant_id: int | None) -> tuple[str, str]:
    """(metadata table, FTS table) of the shared set, or of one tenant's exclusive set."""
    if tenant_id is None:
        return f"{_PREFIX}_meta", f"{_PREFIX}_fts"
    if isinstance(tenant_id, bool) or not isinstance(tenant_id, int) or tenant_id < 0:
        raise ValueError("tenant_id must be a non-negative int")
    return f"{_PREFIX}_t{tenant_id}_meta", f"{_PREFIX}_t{tenant_id}_fts"


def build_where(flt: IndexFilter, alias: str = "m") -> tuple[str, list]:
    """SQL condition over the metadata table and its parameters; `flt` must be clean."""
    clauses, params = [f"{alias}.tenant_id = ?"], [flt.tenant_id]
    for field, column in _FILTER_COLUMNS.items():
        values = getattr(flt, field)
        if field == "parent_ids" and flt.or_ids:  # parent in parent_ids OR id in or_ids
            either = [_member(alias, c, v, params) for c, v in (("parent_id", values), ("id", flt.or_ids)) if v]
            clauses.append(f"({' OR '.join(either)})")
        elif field == "kb_ids" or values:  # kb_ids always narrows: an empty tuple matches nothing
            clauses.append(_member(alias, column, values, params))
    for column in ("user_id", "session_id", *SCOPE_FIELDS):
        if getattr(flt, column) is not None:
            clauses.append(f"{alias}.{column} = ?")
            params.append(getattr(flt, column))
    for cond in flt.metadata:
        clauses.append(_metadata_clause(alias, cond, params))
    return " AND ".join(clauses), params


_RANGE_SQL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _metadata_clause(alias: str, cond, params: list) -> str:
    """One metadata condition over the row's JSON `meta`; the key is a checked identifier, and both the
    JSON path and the values are bound parameters. json_type keeps strings and numbers apart (SQLite
    would otherwise call every string greater than every number)."""
    path = f"$.{cond.key}"
    value, kind = f"json_extract({alias}.meta, ?)", f"json_type({alias}.meta, ?)"
    if cond.op == "in":
        either = []
        for v in cond.values:
            if isinstance(v, str):
                either.append(f"({kind} = 'text' AND {value} = ?)")
            else:
                either.append(f"({kind} IN ('integer', 'real') AND {value} = ?)")
            params.extend([path, path, v])
        return f"({' OR '.join(either)})"
    params.extend([path, path, float(cond.values[0])])
    return f"({kind} IN ('integer', 'real') AND {value} {_RANGE_SQL[cond.op]} ?)"


def _member(alias: str, column: str, values: tuple, params: list) -> str:
    """`column IN (…)` with `values` added to `params`; a long list goes in as one JSON parameter."""
    if len(values) <= IN_LIST_INLINE:
        params += values
        return f"{alias}.{column} IN ({', '.join('?' * len(values))})"
    params.append(json.dumps(list(values)))
    return f"{alias}.{column} IN (SELECT value FROM json_each(?))"


def _over_cpu_deadline() -> int:
    deadline = cpu_deadline.get()
    return 1 if deadline is not None and time.thread_time() > deadline else 0
_ADDED_COLUMNS = (("agent_id", "''"), ("group_id", "''"), ("run_id", "''"), ("meta", "'{}'"))


def _missing_columns(conn: sqlite3.Connection, meta: str) -> list[tuple[str, str]]:
    have = {row[1] for row in conn.execute(f"PRAGMA table_info({meta})")}
    return [(column, default) for column, default in _ADDED_COLUMNS if column not in have]


def _add_missing_columns(conn: sqlite3.Connection, meta: str) -> None:
    """A table made before scopes and metadata existed gets their columns, empty for its rows (in the
    caller's write transaction; a concurrent process may have added them first)."""
    for column, default in _missing_columns(conn, meta):
        conn.execute(f"ALTER TABLE {meta} ADD COLUMN {column} TEXT NOT NULL DEFAULT {default}")
    conn.execute(f"CREATE INDEX IF NOT EXISTS {meta}_agent ON {meta} (agent_id)")


def match_expression(terms: list[str]) -> str:
    """An FTS5 query that can only mean "any of these terms": each one a quoted string."""
    quoted = ['"' + term.replace('"', '""') + '"' for term in dict.fromkeys(terms)]
    return " OR ".join(quoted[:MAX_QUERY_TERMS])


class SqliteKeywordIndex:
    """KeywordIndex over SQLite FTS5 with bm25() ranking; several processes may write at once."""

    # One per process: each thread gets its own sqlite3 connection from the thread-local below.
    thread_safe = True

    # A file another writer held locked past busy_timeout: the next attempt may well get it.
    transient = staticmethod(busy)
    bm25_idf = "fts5"  # bm25()'s ln((N - n + 0.5) / (n + 0.5)), floored at 1e-6 (base.KeywordIndex)

    @staticmethod
    def build_options(options: dict, build: int) -> dict:
        """The OPTIONS of projection build `build`: a file of its own beside the configured one
        (`keyword.sqlite3` -> `keyword.b3.sqlite3`), so dropping an old build never touches the new."""
        path = Path(options.get("path") or "keyword.sqlite3")
        return {**options, "path": str(path.with_name(f"{path.stem}.b{int(build)}{path.suffix}"))}

    def __init__(self, options: dict):
        if not options.get("path"):
            raise ImproperlyConfigured("SqliteKeywordIndex needs OPTIONS['path'].")
        self.path = Path(options["path"])
        self.timeout = float(options.get("timeout", 30))
        self._connections = ThreadConnections(self._connect)
        self._ready: set[str] = set()  # table sets created (by anyone) as far as this process knows

    # --- connections and transactions
    def _conn(self) -> sqlite3.Connection:
        return self._connections.get()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # timeout is SQLite's busy_timeout: a writer waits for another process's lock instead of failing.
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        use_wal(conn, self.timeout)  # readers never block the one writer
        # A search over its CPU budget is interrupted inside SQLite, not after bm25() has scored
        # every row a common term matches (the handler runs every 10,000 virtual machine steps).
        conn.set_progress_handler(_over_cpu_deadline, 10_000)
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with transaction(self._conn()) as conn:
            yield conn

    def close(self) -> None:
        """Close this thread's connection; other threads' go with the dropped thread-local."""
        self._connections.close()

    def ping(self) -> None:
        """Open (or reuse) this thread's connection and run a trivial statement (the health check)."""
        self._conn().execute("SELECT 1").fetchone()

    # --- schema
    def _ensure(self, conn: sqlite3.Connection, tenant_id: int | None) -> str:
        meta, fts = table_names(tenant_id)
        if meta not in self._ready:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {meta} (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
                "tenant_id INTEGER NOT NULL, kb_id INTEGER NOT NULL, document_id INTEGER NOT NULL, "
                "kind TEXT NOT NULL, parent_id TEXT NOT NULL, status TEXT NOT NULL, "
                "user_id TEXT NOT NULL, session_id TEXT NOT NULL, agent_id TEXT NOT NULL DEFAULT '', "
                "group_id TEXT NOT NULL DEFAULT '', run_id TEXT NOT NULL DEFAULT '', "
                "meta TEXT NOT NULL DEFAULT '{}')"
            )
            _add_missing_columns(conn, meta)
            for name, columns in (("scope", "tenant_id, kb_id, kind, status"), ("document", "document_id"),
                                  ("parent", "parent_id"), ("user", "user_id"), ("session", "session_id")):
                conn.execute(f"CREATE INDEX IF NOT EXISTS {meta}_{name} ON {meta} ({columns})")
            conn.execute(f'CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING fts5(text_seg, tokenize="{TOKENIZE}")')
        return meta

    def _exists(self, conn: sqlite3.Connection, tenant_id: int | None) -> bool:
        meta, _ = table_names(tenant_id)
        if meta in self._ready:
            return True
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (meta,)).fetchone()
        if found and _missing_columns(conn, meta):
            with self._write() as writing:
                _add_missing_columns(writing, meta)
        if found:
            self._ready.add(meta)
        return bool(found)

    def _read(self, flt: IndexFilter, query):
        """Run `query(conn, meta, fts)` against the filter's table set; None when it does not exist."""
        conn = self._conn()
        tenant = flt.tenant_id if flt.exclusive else None
        try:
            if not self._exists(conn, tenant):
                return None
            return query(conn, *table_names(tenant))
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            self._ready.clear()  # another process ran drop_all
            return None

    # --- KeywordIndex
    def upsert(self, rows: list[IndexRow], *, exclusive: bool = False) -> None:
        # Segment outside the transaction: jieba is the slow part, the write lock should not wait on it.
        prepared = [(row, segment(row.text)) for row in clean_rows(rows)]
        if not prepared:
            return
        try:
            self._upsert(prepared, exclusive)
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            self._ready.clear()  # tables dropped by another process since we created them: once more
            self._upsert(prepared, exclusive)

    def _upsert(self, prepared: list[tuple[IndexRow, str]], exclusive: bool) -> None:
        groups: dict[int | None, list[tuple[IndexRow, str]]] = {}
        for row, text_seg in prepared:
            groups.setdefault(row.tenant_id if exclusive else None, []).append((row, text_seg))
        created = set()
        with self._write() as conn:
            for tenant, group in groups.items():
                meta, fts = table_names(tenant)
                created.add(self._ensure(conn, tenant))
                # The rid survives an update (ON CONFLICT keeps the row), so the FTS row is replaced
                # in place: an upsert of the same id is idempotent and leaves no stale terms.
                conn.executemany(
                    f"INSERT INTO {meta} (id, tenant_id, kb_id, document_id, kind, parent_id, status, user_id, "
                    "session_id, agent_id, group_id, run_id, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (id) DO UPDATE SET "
                    "tenant_id = excluded.tenant_id, kb_id = excluded.kb_id, document_id = excluded.document_id, "
                    "kind = excluded.kind, parent_id = excluded.parent_id, status = excluded.status, "
                    "user_id = excluded.user_id, session_id = excluded.session_id, agent_id = excluded.agent_id, "
                    "group_id = excluded.group_id, run_id = excluded.run_id, meta = excluded.meta",
                    [(row.id, row.tenant_id, row.kb_id, row.document_id, row.kind, row.parent_id, row.status,
                      row.user_id, row.session_id, row.agent_id, row.group_id, row.run_id,
                      json.dumps(row.metadata, ensure_ascii=False)) for row, _ in group],
                )
                rids = dict(conn.execute(f"SELECT id, rid FROM {meta} WHERE id IN (SELECT value FROM json_each(?))",
                                         (json.dumps([row.id for row, _ in group]),)))
                conn.executemany(f"INSERT OR REPLACE INTO {fts} (rowid, text_seg) VALUES (?, ?)",
                                 [(rids[row.id], text_seg) for row, text_seg in group])
        self._ready |= created

    def search(self, query: str, flt: IndexFilter, top_k: int) -> list[Hit]:
        flt, limit = clean_filter(flt), check_top_k(top_k)
        terms = index_terms(check_query(query))
        if not terms or matches_nothing(flt):
            return []
        where, params = build_where(flt)

        def run(conn, meta, fts):
            # bm25() is negative, lower is better; negated so a higher Hit.score is a better match.
            return conn.execute(
                f"SELECT m.id, -bm25({fts}) AS score, m.kind, m.kb_id, m.document_id, m.parent_id "
                f"FROM {fts} JOIN {meta} AS m ON m.rid = {fts}.rowid "
                f"WHERE {fts} MATCH ? AND {where} ORDER BY score DESC, m.rid LIMIT ?",
                [match_expression(terms), *params, limit],
            ).fetchall()

        return [
            Hit(id=id_, score=score, extra={"kind": kind, "kb_id": kb_id, "document_id": doc_id, "parent_id": parent})
            for id_, score, kind, kb_id, doc_id, parent in self._read(flt, run) or []
        ]

    def count(self, flt: IndexFilter) -> int:
        flt = clean_filter(flt)
        if matches_nothing(flt):
            return 0
        where, params = build_where(flt)
        return self._read(flt, lambda conn, meta, fts: conn.execute(
            f"SELECT count(*) FROM {meta} AS m WHERE {where}", params).fetchone()[0]) or 0

    def ids(self, flt: IndexFilter) -> Iterator[str]:
        flt = clean_filter(flt)  # checked now, not on the caller's first next()
        return iter(()) if matches_nothing(flt) else self._ids(flt)

    def _ids(self, flt: IndexFilter) -> Iterator[str]:
        where, params = build_where(flt)
        after = 0
        while True:  # keyset pages: no read transaction stays open while the caller iterates
            page = self._read(flt, lambda conn, meta, fts: conn.execute(
                f"SELECT m.rid, m.id FROM {meta} AS m WHERE {where} AND m.rid > ? ORDER BY m.rid LIMIT ?",
                [*params, after, PAGE]).fetchall()) or []
            yield from (id_ for _, id_ in page)
            if len(page) < PAGE:
                return
            after = page[-1][0]

    def delete(self, flt: IndexFilter) -> int:
        flt = clean_filter(flt)
        if matches_nothing(flt):
            return 0
        tenant = flt.tenant_id if flt.exclusive else None
        where, params = build_where(flt)
        meta, fts = table_names(tenant)
        conn = self._conn()
        if not self._exists(conn, tenant):
            return 0
        try:
            with self._write() as conn:
                conn.execute(f"DELETE FROM {fts} WHERE rowid IN (SELECT m.rid FROM {meta} AS m WHERE {where})", params)
                return conn.execute(
                    f"DELETE FROM {meta} WHERE rid IN (SELECT m.rid FROM {meta} AS m WHERE {where})", params
                ).rowcount
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            self._ready.clear()
            return 0

    def drop_all(self) -> None:
        with self._write() as conn:
            names = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for name in names:
                if _TABLE_RE.match(name):  # FTS5 drops its own shadow tables with the virtual table
                    conn.execute(f"DROP TABLE IF EXISTS {name}")
        self._ready.clear()
