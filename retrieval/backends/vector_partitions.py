"""The in-process copy of the embedded vector index's partitions (retrieval/backends/sqlite_vectors.py
keeps them current from its SQLite file): each partition's unit vectors and its rows' filter fields,
the filter compiled from IndexFilter, the exact scan and the approximate index's build and rescoring.

The filter is evaluated from IndexFilter's own fields (`predicates`), not from a list written
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
import threading
from collections.abc import Callable
from contextlib import nullcontext

import numpy as np

from retrieval.backends.base import IndexFilter, metadata_holds

logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # which SIMD build it tries is no news
import faiss  # noqa: E402  (after quieting its loader's log)

from retrieval.backends.coarse import Coarse  # noqa: E402  (imports faiss too)

# One thread per search: the search pools run several at once, and a query's scan is memory-bound.
faiss.omp_set_num_threads(1)

HIT_FIELDS = ("kind", "kb_id", "document_id", "parent_id")
# Returned when the row has it: rows written before the field existed have none (code -1 in its
# column), and a partition none of whose rows has it has no column at all.
OPTIONAL_HIT_FIELDS = ("script",)
PARTITION_FIELDS = ("tenant_id", "kb_id", "kind")  # narrowed in SQL through the partition table
COMPACT_SHARE = 0.25  # rebuild a partition's arrays once this share of their slots is dead


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


def predicates(flt: IndexFilter) -> tuple[list[tuple[str, Callable]], tuple[str, ...], tuple[str, ...]]:
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
    tests, ids, or_ids = predicates(flt)
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


class Partition:
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
                if name in PARTITION_FIELDS:  # the same in every row of a partition
                    col.codes[slots] = col.code(fields[0].get(name))
                    continue
                code_of, code = col.code_of, col.code
                col.codes[slots] = [code_of.get(v) if v.__class__ in (str, int) and v in code_of else code(v)
                                    for v in (row.get(name) for row in fields)]
        self.version = version
        if self.dead > 1000 and self.dead > COMPACT_SHARE * self.n:
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

    def view(self) -> "View":
        """What a search reads, taken under the partition's lock and read without it: a catch-up
        replaces the arrays it grows or compacts (the view keeps the old ones) and appends to the
        lists (the view reads only its first n); a row rewritten in place meanwhile is a concurrent write."""
        return View(self.n, self.vectors, self.alive, self.ids, self.slot_of_id,
                     {name: (col.codes, col.values, col.code_of) for name, col in self.columns.items()})


class View:
    __slots__ = ("alive", "columns", "ids", "n", "slot_of_id", "vectors")

    def __init__(self, n, vectors, alive, ids, slot_of_id, columns):
        self.n, self.vectors, self.alive, self.ids, self.slot_of_id, self.columns = (
            n, vectors, alive, ids, slot_of_id, columns)

    def _slots(self, ids) -> list[int]:
        return [s for s in map(self.slot_of_id.get, ids) if s is not None and s < self.n]

    def select(self, flt: IndexFilter) -> np.ndarray:
        """Which of the first n slots hold a live row the filter lets through (tenant, KB and kind are the partition's)."""
        tests, ids, or_ids = predicates(flt)
        n = self.n
        mask = self.alive[:n].copy()
        if ids:  # a few picked rows: everything else is out before any column is read
            picked = np.zeros(n, dtype=bool)
            picked[self._slots(ids)] = True
            mask &= picked
        for column, test in tests:
            if column in PARTITION_FIELDS:
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

    def extras(self, slots) -> list[dict]:
        """Each slot's hit fields (`Hit.extra`), each field's codes read for all of them at once (a search
        returns hundreds of hits: one numpy read per field instead of one per field and hit)."""
        codes_of = np.asarray(slots, dtype=np.int64)
        out = [{} for _ in range(len(codes_of))]
        for name in HIT_FIELDS:
            codes, values = self.columns[name][0], self.columns[name][1]
            for item, code in zip(out, codes[codes_of].tolist()):
                item[name] = values[code]
        for name in OPTIONAL_HIT_FIELDS:
            column = self.columns.get(name)
            if column is None:
                continue
            codes, values = column[0], column[1]
            for item, code in zip(out, codes[codes_of].tolist()):
                if code >= 0 and values[code]:
                    item[name] = values[code]
        return out


def build_coarse(part: Partition, vectors: np.ndarray, n: int, generation: int, log_end: int, *,
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


def rescored(view: "View", slots: np.ndarray, query: np.ndarray, limit: int,
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
    return list(zip(scores.tolist(), [view.ids[sl] for sl in slots.tolist()], view.extras(slots)))


def scan(block: np.ndarray, queries: np.ndarray, mask: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
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
