"""BM25 keyword index in tantivy directories, searched inside each process: the embedded default.

Layout under OPTIONS["directory"] (one per installation, under var/): `g<analyzer>s<schema>/shared`
for the shared table set and `g…/t<id>` for each exclusive tenant, each a tantivy index; the
generation in the name means an index written with another analysis (retrieval.text) or another
schema is never searched, like the FTS5 backend's table names. `.write.lock` beside them is the one
writer's turn.

Text is analysed by `retrieval.text.index_terms` (jieba for Chinese, Snowball stems) and indexed
through tantivy's whitespace tokenizer, so tantivy sees exactly the terms every backend sees. Every
filterable field is an indexed term (ids, kinds, scopes as raw strings, tenant/KB/document as u64,
metadata as `key\\x1fvalue` strings and `key\\x1f<order-preserving hex of the float>` numbers), and
queries are built term by term through the API: no query string is ever parsed, so user input is only
ever a term's value. Filters are a zero-score required clause of the same query, so they apply before
the top k.

Several processes (web, workers) write: one tantivy IndexWriter at a time across processes, taken
under an fcntl lock on `.write.lock` (the OS frees it when a holder dies), opened on a fresh view of
the directory, committed, merged and closed before the lock is let go. A commit replaces meta.json
(a new inode), so a reader stats it before each search (a microsecond) and reloads when it changed:
a write or delete of any process is seen at the next search of every other. A process killed
mid-write loses its uncommitted rows only, which the database still holds (`reconcile --repair` and
`reindex` write them again).

Scores are tantivy's BM25 (k1 1.2, b 0.75) with Lucene's idf ln(1 + (N − n + 0.5)/(n + 0.5)), whose
statistics count documents deleted but not yet merged away.
"""

import fcntl
import os
import shutil
import struct
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from django.core.exceptions import ImproperlyConfigured

from retrieval.backends import check_query, check_top_k, clean_filter, clean_rows, matches_nothing
from retrieval.backends.base import SCOPE_FIELDS, Hit, IndexFilter, IndexRow
from retrieval.text import ANALYZER_GENERATION, index_terms

SCHEMA_VERSION = 1  # bumped with any change of the fields below: a new directory generation
GENERATION = f"g{ANALYZER_GENERATION}s{SCHEMA_VERSION}"
MAX_QUERY_TERMS = 64  # as the FTS5 backend: a pasted page as query ranks well enough on 64 terms
PAGE = 1000
FEW_VALUES = 32  # filter values up to which a disjunction of terms beats a term-set query (any_of)
# A field whose every value is one row's or ten's (an id, a parent id): a disjunction of that many
# terms still beats the term-set query, which marks its bitset over the whole index first.
RARE_FIELDS = ("id", "parent_id")
MANY_RARE_VALUES = 4096
WRITER_HEAP = 32_000_000  # bytes of tantivy's indexing arena (its minimum is 15 MB)
_SEP = "\x1f"  # between a metadata key (an identifier, never this character) and its value
_RAW_FIELDS = ("id", "kind", "parent_id", "status", "user_id", "session_id", *SCOPE_FIELDS)
_STORED = ("id", "kind", "parent_id", "kb_id", "document_id")
_LIST_FIELDS = {"kb_ids": "kb_id", "kinds": "kind", "document_ids": "document_id", "ids": "id", "statuses": "status"}
# An Index left by the parent of a forked process: its threads did not come along, so it is neither
# used nor dropped in the child (dropping joins threads that do not exist there).
_INHERITED: list = []


def _tantivy():
    import tantivy  # imported on first use: processes that never search keywords do without it

    return tantivy


def _schema():
    tantivy = _tantivy()
    builder = tantivy.SchemaBuilder()
    for name in _RAW_FIELDS:
        builder.add_text_field(name, stored=name in _STORED, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("text", tokenizer_name="whitespace", index_option="freq")
    for name in ("tenant_id", "kb_id", "document_id"):
        builder.add_unsigned_field(name, stored=name in _STORED, indexed=True)
    builder.add_text_field("meta_str", tokenizer_name="raw", index_option="basic")
    builder.add_text_field("meta_num", tokenizer_name="raw", index_option="basic")
    return builder.build()


_SCHEMA = None


def schema():
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = _schema()
    return _SCHEMA


def sortable(number) -> str:
    """A number as 16 hex digits whose string order is the numbers' order (3 and 3.0 alike)."""
    try:
        x = float(number) + 0.0  # -0.0 -> 0.0
    except OverflowError:  # an int beyond a double: as far out as a double goes
        x = float("inf") if number > 0 else float("-inf")
    bits = struct.unpack(">Q", struct.pack(">d", x))[0]
    return f"{bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits >> 63 else bits | 1 << 63:016x}"


def document(row: IndexRow, terms: list[str]):
    doc = _tantivy().Document()
    for name in _RAW_FIELDS:
        doc.add_text(name, getattr(row, name))
    doc.add_text("text", " ".join(terms))
    for name in ("tenant_id", "kb_id", "document_id"):
        doc.add_unsigned(name, getattr(row, name))
    for key, value in row.metadata.items():
        if isinstance(value, str):
            doc.add_text("meta_str", f"{key}{_SEP}{value}")
        else:
            doc.add_text("meta_num", f"{key}{_SEP}{sortable(value)}")
    return doc


def filter_query(flt: IndexFilter, searcher):
    """The tantivy query a clean filter means; `searcher` is the snapshot it will run on (a metadata
    range is the set of its key's number terms in that snapshot that fall in the range)."""
    tantivy = _tantivy()
    Q, sc = tantivy.Query, schema()
    must = [_term(sc, "tenant_id", flt.tenant_id)]
    for name, field in _LIST_FIELDS.items():
        values = getattr(flt, name)
        if name == "kb_ids" or values:  # kb_ids always narrows (an empty tuple matches nothing, checked before)
            must.append(any_of(field, values))
    if flt.parent_ids or flt.or_ids:  # parent in parent_ids OR id in or_ids
        either = [any_of(field, values) for field, values in (("parent_id", flt.parent_ids), ("id", flt.or_ids))
                  if values]
        must.append(Q.boolean_query([(tantivy.Occur.Should, q) for q in either]))
    for name in ("user_id", "session_id", *SCOPE_FIELDS):
        if getattr(flt, name) is not None:
            must.append(_term(sc, name, getattr(flt, name)))
    for cond in flt.metadata:
        must.append(_metadata_query(cond, searcher))
    return Q.boolean_query([(tantivy.Occur.Must, q) for q in must])


def _metadata_query(cond, searcher):
    tantivy = _tantivy()
    Q = tantivy.Query
    prefix = f"{cond.key}{_SEP}"
    if cond.op == "in":
        strings = [prefix + v for v in cond.values if isinstance(v, str)]
        numbers = [prefix + sortable(v) for v in cond.values if not isinstance(v, str)]
        either = [any_of(field, terms) for field, terms in (("meta_str", strings), ("meta_num", numbers)) if terms]
        return Q.boolean_query([(tantivy.Occur.Should, q) for q in either])
    bound = sortable(cond.values[0])
    keep = {"gt": bound.__lt__, "gte": bound.__le__, "lt": bound.__gt__, "lte": bound.__ge__}[cond.op]
    terms = [term for term, _ in searcher.terms_with_prefix("meta_num", prefix) if keep(term[len(prefix):])]
    return any_of("meta_num", terms) if terms else Q.empty_query()


def _term(sc, field: str, value):
    return _tantivy().Query.term_query(sc, field, value, index_option="basic")


def any_of(field: str, values) -> object:
    """Rows whose `field` is one of `values`. A few values: a disjunction of term queries, which
    tantivy walks lazily beside the text's postings; many: one term-set query, which marks every
    matching row in a bitset first (a common value such as status "active" in a set query cost
    1-9 ms per search at 30k rows, the term query 0.02). Ids and parent ids match a row or ten each:
    up to MANY_RARE_VALUES of them stay a disjunction."""
    tantivy = _tantivy()
    sc, values = schema(), list(values)
    if len(values) == 1:
        return _term(sc, field, values[0])
    if len(values) <= (MANY_RARE_VALUES if field in RARE_FIELDS else FEW_VALUES):
        return tantivy.Query.boolean_query([(tantivy.Occur.Should, _term(sc, field, v)) for v in values])
    return tantivy.Query.term_set_query(sc, field, values)


def text_query(terms: list[str]):
    """Any of the terms, each scored by BM25 (a disjunction, as FTS5's OR of quoted strings)."""
    tantivy = _tantivy()
    sc = schema()
    return tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(sc, "text", term, index_option="freq"))
         for term in list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]])


class WriteLockTimeout(TimeoutError):
    """Another process held the keyword index's write lock past the timeout."""


@dataclass
class _Reader:
    index: object
    directory_inode: int
    version: tuple


class TantivyKeywordIndex:
    """KeywordIndex over tantivy indexes in a directory; one writer at a time across processes."""

    thread_safe = True
    bm25_idf = "lucene"  # ln(1 + (N - n + 0.5) / (n + 0.5)): the contract suite's reference BM25 uses it

    @staticmethod
    def transient(exc: BaseException) -> bool:
        """The write lock not had in time (another process writing a large batch) is "not now"."""
        return isinstance(exc, WriteLockTimeout) or "LockBusy" in str(exc) and isinstance(exc, ValueError)

    @staticmethod
    def describe(options: dict) -> str:
        return f"tantivy in {options.get('directory') or '?'}"

    @staticmethod
    def build_options(options: dict, build: int) -> dict:
        """Build `build`'s directory beside the configured one (`keyword-index` -> `keyword-index.b3`)."""
        directory = Path(options.get("directory") or "keyword-index")
        return {**options, "directory": str(directory.with_name(f"{directory.name}.b{int(build)}"))}

    def __init__(self, options: dict):
        if not options.get("directory"):
            raise ImproperlyConfigured("TantivyKeywordIndex needs OPTIONS['directory'].")
        self.directory = Path(options["directory"])
        self.timeout = float(options.get("timeout", 30))
        self._readers: dict[str, _Reader] = {}
        self._lock = threading.Lock()  # guards _readers
        self._write_turn = threading.Lock()  # one writing thread per process (flock is per open file)
        self._pid = os.getpid()

    # --- places
    def _set_dir(self, tenant_id: int | None) -> Path:
        return self.directory / GENERATION / ("shared" if tenant_id is None else f"t{int(tenant_id)}")

    def _forked(self) -> None:
        if self._pid != os.getpid():
            _INHERITED.append(self._readers)
            self._readers, self._lock, self._write_turn = {}, threading.Lock(), threading.Lock()
            self._pid = os.getpid()

    # --- reading
    def _searcher(self, tenant_id: int | None):
        """A snapshot of the table set with every commit made so far; None when it does not exist."""
        self._forked()
        path = self._set_dir(tenant_id)
        try:
            directory_inode = os.stat(path).st_ino
            st = os.stat(path / "meta.json")
        except FileNotFoundError:
            with self._lock:
                self._readers.pop(str(path), None)
            return None
        version = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            reader = self._readers.get(str(path))
            if reader is None or reader.directory_inode != directory_inode:
                reader = self._readers[str(path)] = _Reader(self._open(path), directory_inode, ())
            if reader.version != version:
                self._reload(reader.index)
                reader.version = version  # stat'ed before the reload: a later commit is seen next time
            return reader.index.searcher()

    def _open(self, path: Path):
        for attempt in range(5):
            try:
                index = _tantivy().Index.open(str(path))
                index.config_reader(reload_policy="manual", num_warmers=0)
                return index
            except ValueError:
                if attempt == 4:
                    raise
                time.sleep(0.01 * (attempt + 1))  # a writer's commit removed a file between meta.json and it

    @staticmethod
    def _reload(index) -> None:
        for attempt in range(5):
            try:
                return index.reload()
            except ValueError:
                if attempt == 4:
                    raise
                time.sleep(0.01 * (attempt + 1))

    # --- writing
    @contextmanager
    def _writing(self) -> Iterator[None]:
        """This process's turn to write, among its threads and every other process's."""
        self._forked()
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._write_turn, open(self.directory / ".write.lock", "a") as fh:
            deadline = time.monotonic() + self.timeout
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise WriteLockTimeout(f"the keyword index {self.directory} stayed locked by another "
                                               f"process for {self.timeout:.0f}s") from None
                    time.sleep(0.005)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _write_index(self, tenant_id: int | None, create: bool):
        """A fresh view of the table set for this write (its file list as the last writer left it)."""
        path = self._set_dir(tenant_id)
        if not (path / "meta.json").exists():
            if not create:
                return None
            path.mkdir(parents=True, exist_ok=True)
            return _tantivy().Index(schema(), path=str(path), reuse=True)
        return _tantivy().Index.open(str(path))

    @staticmethod
    def _commit(writer) -> None:
        """Commit, then let the merges that commit started finish, so no thread of this writer is
        still at work on the directory once the lock is let go."""
        writer.commit()
        writer.wait_merging_threads()

    # --- KeywordIndex
    def upsert(self, rows: list[IndexRow], *, exclusive: bool = False) -> None:
        # Analyse outside the lock: jieba is the slow part, other writers should not wait on it.
        groups: dict[int | None, list] = {}
        for row in clean_rows(rows):
            groups.setdefault(row.tenant_id if exclusive else None, []).append(document(row, index_terms(row.text)))
        if not groups:
            return
        ids = {tenant: [doc["id"][0] for doc in docs] for tenant, docs in groups.items()}
        with self._writing():
            for tenant, docs in groups.items():
                writer = self._write_index(tenant, create=True).writer(WRITER_HEAP, 1)
                for id_ in ids[tenant]:  # then added after: a replaced row keeps none of its old terms
                    writer.delete_documents_by_term("id", id_)
                for doc in docs:
                    writer.add_document(doc)
                self._commit(writer)

    def search(self, query: str, flt: IndexFilter, top_k: int) -> list[Hit]:
        flt, limit = clean_filter(flt), check_top_k(top_k)
        terms = index_terms(check_query(query))
        if not terms or matches_nothing(flt):
            return []
        searcher = self._searcher(flt.tenant_id if flt.exclusive else None)
        if searcher is None:
            return []
        tantivy = _tantivy()
        query = tantivy.Query.boolean_query([
            (tantivy.Occur.Must, text_query(terms)),
            (tantivy.Occur.Must, tantivy.Query.const_score_query(filter_query(flt, searcher), 0.0)),
        ])
        hits = []
        for score, address in searcher.search(query, limit, count=False).hits:
            doc = searcher.doc(address)
            hits.append(Hit(id=doc["id"][0], score=float(score), extra={
                "kind": doc["kind"][0], "kb_id": doc["kb_id"][0], "document_id": doc["document_id"][0],
                "parent_id": doc["parent_id"][0]}))
        return hits

    def count(self, flt: IndexFilter) -> int:
        flt = clean_filter(flt)
        if matches_nothing(flt):
            return 0
        searcher = self._searcher(flt.tenant_id if flt.exclusive else None)
        return 0 if searcher is None else searcher.search(filter_query(flt, searcher), 1, count=True).count

    def ids(self, flt: IndexFilter) -> Iterator[str]:
        flt = clean_filter(flt)  # checked now, not on the caller's first next()
        return iter(()) if matches_nothing(flt) else self._ids(flt)

    def _ids(self, flt: IndexFilter) -> Iterator[str]:
        searcher = self._searcher(flt.tenant_id if flt.exclusive else None)
        if searcher is None:
            return
        query = filter_query(flt, searcher)
        total = searcher.search(query, 1, count=True).count
        if not total:
            return
        # One snapshot for every page: it holds no lock, and what was matched is what is listed.
        addresses = [address for _, address in searcher.search(query, total, count=False).hits]
        for start in range(0, len(addresses), PAGE):
            yield from [searcher.doc(address)["id"][0] for address in addresses[start:start + PAGE]]

    def delete(self, flt: IndexFilter) -> int:
        flt = clean_filter(flt)
        if matches_nothing(flt):
            return 0
        tenant = flt.tenant_id if flt.exclusive else None
        # Under the lock even when there may be nothing: a directory that cannot be made or locked is
        # an error the caller reports (`reconcile --repair` then), not "nothing to delete".
        with self._writing():
            index = self._write_index(tenant, create=False)
            if index is None:  # no such table set (yet, or dropped)
                return 0
            searcher = index.searcher()  # what the last commit holds; no one else writes until we let go
            query = filter_query(flt, searcher)
            removed = searcher.search(query, 1, count=True).count
            if removed:
                writer = index.writer(WRITER_HEAP, 1)
                writer.delete_documents_by_query(query)
                self._commit(writer)
        return removed

    def drop_all(self) -> None:
        """Remove every generation's table sets (older analyses and schemas included)."""
        with self._writing():
            for child in self.directory.iterdir():
                if child.is_dir() and child.name.startswith("g"):
                    shutil.rmtree(child)
        with self._lock:
            self._readers.clear()

    def is_empty(self) -> bool:
        """No row in any table set (retrieval/backends/index_upgrade.py asks)."""
        root = self.directory / GENERATION
        sets = [p.name for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
        for name in sets:
            searcher = self._searcher(None if name == "shared" else int(name[1:]))
            if searcher is not None and searcher.num_docs:
                return False
        return True

    def close(self) -> None:
        self._forked()  # a parent's readers are left alone, not dropped, in a child
        with self._lock:
            self._readers.clear()

    def ping(self) -> None:
        """The directory is there (or can be made) and writable; the shared set opens when it exists."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if not os.access(self.directory, os.W_OK):
            raise PermissionError(f"the keyword index directory {self.directory} is not writable")
        self._searcher(None)
