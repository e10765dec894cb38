"""Engine calls of one search: each a leaf task with a deadline, joined in the request thread.

The rule that keeps search from deadlocking: a task on these pools calls exactly one engine (one
search, or a batch of one stage's searches made one after another) and never waits on another
task. Every stage plans its calls, starts them (`start_*`), and joins them (`wait`) in the thread
that serves the request. A pool per engine is a bulkhead: a vector index that stops answering
fills only the vector pool, and keyword searches go on.

Every join has a deadline (`SEARCH_ENGINE_TIMEOUT_SECONDS`, counted from the moment the call was
started, so time spent queued counts). A call past its deadline raises `EngineTimeout` (HTTP 504),
an engine that fails raises `EngineUnavailable` (HTTP 503); both name the engine. A call that
timed out may still occupy its pool thread until the engine answers or its client times out
(pymilvus, SQLite's busy timeout and OpenSearch each have their own); later calls then queue
behind it, and reach their own deadline instead of hanging.
"""

import functools
import logging
import threading
import time
from contextlib import contextmanager
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace

from django.conf import settings

from common.once import once
from retrieval import builds
from common.backends import DEFAULT_ALIAS, keyword_indexes, vector_indexes
from retrieval.backends import cpu_deadline
from retrieval.backends.base import Hit, IndexFilter
from retrieval.embeddings import embedder
from retrieval.search import query_bridge

log = logging.getLogger(__name__)

ENGINE_NAMES = {"embedder": "the embedding model", "vector": "the vector index", "keyword": "the keyword index"}
# Threads per engine. Milvus Lite answers one search at a time, so more vector threads only queue
# there; the keyword index and the embedder release the GIL in C.
_POOL_SIZES = {"embedder": 4, "vector": 8, "keyword": 8}
# How long a search waits for its query's embedding to begin before it goes on (Engines.let_embedding_begin):
# a free embedder thread begins in microseconds; a busy pool is not waited for.
EMBEDDING_HEAD_START = 0.002
EMBEDDING_TOKENIZE_SECONDS = 0.0006  # a question's tokenizing, which the request thread lets run alone


class EngineError(Exception):
    """An engine failed to answer a search; `status` is the HTTP status the API answers with."""

    status = 503

    def __init__(self, engine: str, message: str):
        super().__init__(message)
        self.engine = engine


class EngineUnavailable(EngineError):
    status = 503


class EngineTimeout(EngineError):
    status = 504


class OverCpuBudget(EngineError):
    """The search used more CPU than SEARCH_CPU_BUDGET_SECONDS (a wall deadline does not bound CPU:
    one request of 100,000 ids cost 6.3 CPU-s, issue 30)."""

    status = 503


class CpuBudget:
    """CPU seconds one search may use: the request thread's own plus every leaf call's, each measured
    as its thread's CPU time (the query embedding excepted). Checked at every join, and inside SQLite
    queries (the keyword index reads retrieval.backends.cpu_deadline from a progress handler and
    interrupts a query past it)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._request_thread_start = time.thread_time()
        self.leaves = 0.0
        self.spent = 0.0  # what the search used, set when its `cpu_budget` block ends
        self._lock = threading.Lock()

    def used(self) -> float:
        # Only the request thread calls this (in `wait`), so its own thread_time is the request's.
        return time.thread_time() - self._request_thread_start + self.leaves

    def add(self, seconds: float) -> None:
        with self._lock:
            self.leaves += seconds

    def check(self, engine: str) -> None:
        used = self.used()
        if 0 < self.seconds < used:
            raise OverCpuBudget(engine, f"Search stopped: it used {used:.2f} CPU-seconds, more than the "
                                        f"{self.seconds:g} allowed (SEARCH_CPU_BUDGET_SECONDS); narrow the "
                                        "query or its filters.")


_local = threading.local()


@contextmanager
def cpu_budget(seconds: float):
    """`with cpu_budget(seconds) as budget:` around one search in the request thread; 0 means no budget
    (the CPU is still measured: `budget.spent` once the block has ended, which LOCI_SEARCH_CPU_PER_MINUTE
    charges; `budget.used()` meanwhile)."""
    budget = CpuBudget(seconds)
    outer, _local.budget = getattr(_local, "budget", None), budget
    try:
        yield budget
    finally:
        budget.spent = budget.used()
        _local.budget = outer


def _metered(engine: str, fn):
    """`fn` charged to the starting search's budget, with its CPU deadline visible to the engine.

    The query embedding is not charged: its cost is fixed by the model's 512-token window, and a
    process's first one loads the model, which is no fault of the request."""
    budget = getattr(_local, "budget", None)
    if budget is None or engine == "embedder":
        return fn

    def run(*args, **kwargs):
        started = time.thread_time()
        if budget.seconds > 0:
            cpu_deadline.set(started + max(0.0, budget.seconds - budget.leaves))
        try:
            return fn(*args, **kwargs)
        finally:
            cpu_deadline.set(None)
            budget.add(time.thread_time() - started)

    return run


@functools.cache  # after the first call a C lookup: starting a call does not enter the registry
def _pool(engine: str) -> ThreadPoolExecutor:
    return once(("retrieval.search.engines", "pool", engine),
                lambda: ThreadPoolExecutor(max_workers=_POOL_SIZES[engine], thread_name_prefix=f"search-{engine}"))


@dataclass
class Pending:
    """A started engine call: its future, which engine, and when it must have answered.

    `after` is the call whose result this one takes as its first argument (a dense search's query
    embedding): it is launched when that one answers, and a failure there is reported as that engine's."""

    engine: str
    future: Future
    deadline: float
    after: "Pending | None" = None


def start(engine: str, fn, *args, **kwargs) -> Pending:
    timeout = settings.SEARCH_ENGINE_TIMEOUT_SECONDS
    return Pending(engine, _pool(engine).submit(_metered(engine, fn), *args, **kwargs), time.monotonic() + timeout)


def start_after(first: Pending, engine: str, fn, *args, **kwargs) -> Pending:
    """`fn(first's result, *args)` on `engine`'s pool, submitted the moment `first` answers.

    No pool thread waits for another task: `first`'s done-callback submits the call, and the
    request thread is free meanwhile (hybrid reads the query's entities while the query embeds).
    The deadline counts from now, like `start`'s."""
    outer: Future = Future()
    fn = _metered(engine, fn)  # captured here, in the request thread

    def settle(inner: Future) -> None:
        try:
            if inner.exception() is None:
                outer.set_result(inner.result())
            else:
                outer.set_exception(inner.exception())
        except InvalidStateError:
            pass  # the waiter gave up (timed out) and cancelled it

    def launch(done: Future) -> None:
        if outer.cancelled() or done.cancelled() or done.exception() is not None:
            return  # `wait` raises first's failure, naming its engine
        try:
            _pool(engine).submit(fn, done.result(), *args, **kwargs).add_done_callback(settle)
        except RuntimeError as exc:  # the pool is shut down (interpreter exit)
            try:
                outer.set_exception(exc)
            except InvalidStateError:
                pass

    pending = Pending(engine, outer, time.monotonic() + settings.SEARCH_ENGINE_TIMEOUT_SECONDS, after=first)
    first.future.add_done_callback(launch)
    return pending


def wait(pending: Pending):
    """The call's result, or EngineTimeout/EngineUnavailable naming the engine. Only the request thread waits."""
    if pending.after is not None:
        wait(pending.after)  # its failure is its own engine's, not this one's
    name = ENGINE_NAMES[pending.engine]
    budget = getattr(_local, "budget", None)
    try:
        result = pending.future.result(timeout=max(0.0, pending.deadline - time.monotonic()))
    except FutureTimeout:
        pending.future.cancel()  # still queued: it never runs; running: its result is dropped
        timeout = settings.SEARCH_ENGINE_TIMEOUT_SECONDS
        raise EngineTimeout(pending.engine, f"Search failed: {name} did not answer within {timeout:g} s.") from None
    except (ValueError, TypeError):
        raise  # a bad argument is a bug of ours or a refused filter, not an engine outage
    except Exception as exc:
        if budget is not None and budget.used() > budget.seconds:  # interrupted by the budget (SQLite)
            budget.check(pending.engine)
        log.warning("search: %s failed: %s: %s", name, type(exc).__name__, exc)
        raise EngineUnavailable(pending.engine, f"Search failed: {name} is unavailable ({type(exc).__name__}: "
                                                f"{str(exc)[:300]}).") from exc
    if budget is not None:
        budget.check(pending.engine)
    return result


@dataclass
class Part:
    """One search's answer inside a batched leaf task (`Engines.start_all`): several searches of one
    engine made one after another in one pool task, one round trip for them all."""

    batch: Pending
    index: int


@dataclass
class Bridged:
    """A keyword call for the query and one for its bridged words, merged when joined."""

    asked: "Pending | Part"
    bridged: "Pending | Part"
    limit: int


def _joined(call) -> list[Hit]:
    return wait(call.batch)[call.index] if isinstance(call, Part) else wait(call)


def _each(search, calls: list[tuple]):
    """A leaf task's body: `search(*args, **kwargs)` for each call, in order (one engine)."""
    def run(*first):
        return [search(*first, *args, **kwargs) for args, kwargs in calls]
    return run


class Engines:
    """The engine calls of one search, for one query text, in one index build.

    The build is read once, when the search starts, so an online reindex switching builds meanwhile
    cannot pair a query embedded by one build's model with the other build's vectors (the old build
    stays for LOCI_REINDEX_DRAIN_SECONDS after a switch). The query is embedded once, on first need,
    and the embedding shared by every dense call.
    `prefetch` records one engine answer for a set of ids so that later calls for a subset of them
    (with the same filter otherwise) are read from it instead of asking the engine again.
    `bridge`: the query's words in the other language (retrieval.search.query_bridge), searched by
    every keyword call beside the query and merged into its hits; "" for none.
    """

    def __init__(self, query: str, build: "builds.Build | None" = None, bridge: str = "", script: str = ""):
        self.query = query
        self.script = script  # the query's (retrieval.relevance.script), when the caller knows it; else ""
        self.build = build or builds.current().live
        self.bridge = bridge
        self._qvec_call: Pending | None = None
        self._embed_began: threading.Event | None = None
        self._qvec: list[float] | None = None
        self._prefetched: dict[IndexFilter, tuple[set, tuple[list[Hit], list[Hit]]]] = {}

    # The two indexes of the build, looked up at their first call of this search (not again per call).
    # (retrieval.backends.vector_index(build=n) and keyword_index(build=n), asked of their handlers).
    @functools.cached_property
    def _vector_search(self):
        return vector_indexes.get(DEFAULT_ALIAS, build=self.build.number).search

    @functools.cached_property
    def _keyword_search(self):
        return keyword_indexes.get(DEFAULT_ALIAS, build=self.build.number).search

    def bm25_with_cosines(self, flt: IndexFilter, limit: int) -> tuple[list[Hit], dict[str, float]]:
        """BM25's hits and, in a dense call filtered to them, the exact cosine of each."""
        sparse = self.bm25(flt, limit)
        if not sparse:
            return [], {}
        ids = tuple(h.id for h in sparse)
        return sparse, {h.id: h.score for h in self.dense(replace(flt, ids=ids), len(ids), floor=-1.0)}

    def with_query(self, query: str) -> "Engines":
        """The engines of another query in the same build, bridged when this one was."""
        bridge = query_bridge.english_terms(query) if self.bridge and query_bridge.applies(query) else ""
        return Engines(query, self.build, bridge)

    # --- starting calls (request thread)
    def start_embedding(self) -> None:
        if self._qvec_call is None and self._qvec is None:
            began = threading.Event()

            def embed(query: str) -> list[float]:
                began.set()
                return self._embed_query(query)

            self._qvec_call, self._embed_began = start("embedder", embed, self.query), began

    def let_embedding_begin(self) -> None:
        """Give the query's embedding, the longest engine call that every dense call waits for, the
        interpreter first: wait (at most EMBEDDING_HEAD_START) until a pool thread has begun it, then
        yield EMBEDDING_TOKENIZE_SECONDS while its tokenizer (Python, holding the GIL) runs.

        Submitted, it began only when the request thread next let the interpreter go (its next
        database read, ~1 ms later), and its tokenizer then contended with the BM25 calls' text
        analysis and the entity read. The request thread has ~7 ms of slack while the model runs,
        so the pause costs nothing on the path (bench.latency at 100k: hybrid p50 −0.5 to −2 ms)."""
        began = self._embed_began
        if began is not None and began.wait(EMBEDDING_HEAD_START) and not self._qvec_call.future.done():
            time.sleep(EMBEDDING_TOKENIZE_SECONDS)

    def _embed_query(self, query: str) -> list[float]:  # on the embedder pool
        return [float(x) for x in embedder(build=self.build).embed_query(query)]

    def qvec(self) -> list[float]:
        if self._qvec is None:
            self.start_embedding()
            self._qvec = wait(self._qvec_call)
        return self._qvec

    def start_dense(self, flt: IndexFilter, limit: int, floor: float | None = None):
        """A dense call (answered from the prefetch table when it covers `flt`), to be joined with `result`.

        While the query is being embedded, the call is chained to the embedding (`start_after`)
        instead of waiting for it here, so the request thread goes on at once."""
        hits = self._from_prefetched(flt, 0)
        if hits is not None:
            return [h for h in hits if floor is None or h.score >= floor][:limit]
        return self._start_vector(self._vector_search, flt, limit, min_score=floor)

    def _start_vector(self, fn, *args, **kwargs):
        """A vector leaf task `fn(query vector, *args)`, chained to the embedding while it runs."""
        if self._qvec is None and self._qvec_call is not None:
            return start_after(self._qvec_call, "vector", fn, *args, **kwargs)
        return start("vector", fn, self.qvec(), *args, **kwargs)

    def start_bm25(self, flt: IndexFilter, limit: int):
        hits = self._from_prefetched(flt, 1)
        if hits is not None:
            return hits[:limit]
        search = self._keyword_search
        asked = start("keyword", search, self.query, flt, limit)
        if not self.bridge:
            return asked
        # Two leaf calls on the keyword pool, joined in the request thread (`result`): no task waits on another.
        return Bridged(asked, start("keyword", search, self.bridge, flt, limit), limit)

    def start_all(self, plan: dict, floor: float | None = None) -> dict:
        """For each key's (filter, limit) a dense and a BM25 call, as `start_both`: the BM25 calls first,
        so they run while the query is embedded, and each engine's calls in one leaf task (those the
        prefetch table does not answer); joined with `join_all`. The embedding, the longest pole, is
        let begin before anything else is started (`let_embedding_begin`)."""
        self.start_embedding()
        self.let_embedding_begin()
        sparse = self._start_bm25_many(plan)
        dense = self._start_dense_many(plan, floor)
        return {key: (dense[key], sparse[key]) for key in plan}

    def _start_dense_many(self, plan: dict, floor: float | None) -> dict:
        calls = [(key, flt, limit) for key, (flt, limit) in plan.items() if self._from_prefetched(flt, 0) is None]
        if len(calls) < 2:
            return {key: self.start_dense(flt, limit, floor) for key, (flt, limit) in plan.items()}
        batch = self._start_vector(_each(self._vector_search,
                                         [((flt, limit), {"min_score": floor}) for _, flt, limit in calls]))
        batched = {key: Part(batch, i) for i, (key, _, _) in enumerate(calls)}
        # A key the prefetch table answers: start_dense reads it there.
        return {key: batched.get(key) or self.start_dense(flt, limit, floor) for key, (flt, limit) in plan.items()}

    def _start_bm25_many(self, plan: dict) -> dict:
        calls = [(key, flt, limit) for key, (flt, limit) in plan.items() if self._from_prefetched(flt, 1) is None]
        if len(calls) < 2:
            return {key: self.start_bm25(flt, limit) for key, (flt, limit) in plan.items()}
        queries = [self.query, self.bridge] if self.bridge else [self.query]
        batch = start("keyword", _each(self._keyword_search,
                                       [((q, flt, limit), {}) for _, flt, limit in calls for q in queries]))
        batched = {}
        for i, (key, _, limit) in enumerate(calls):
            parts = [Part(batch, len(queries) * i + j) for j in range(len(queries))]
            batched[key] = Bridged(*parts, limit) if self.bridge else parts[0]
        return {key: batched.get(key) or self.start_bm25(flt, limit) for key, (flt, limit) in plan.items()}

    def join_all(self, started: dict) -> dict:
        """Each key's (dense hits, BM25 hits) of `start_all`."""
        return {key: (self.result(dense), self.result(sparse)) for key, (dense, sparse) in started.items()}

    def join_prefetching(self, started, flt: IndexFilter, ids: set, kind: str) -> tuple[list[Hit], list[Hit]]:
        """The (dense, BM25) hits of a `start_both`; their hits of `kind` then answer later calls for
        any of `ids` under `flt` (`prefetch`)."""
        both = self.result(started[0]), self.result(started[1])
        if ids:
            self.prefetch(flt, ids, tuple([h for h in hits if h.extra.get("kind") == kind] for hits in both))
        return both

    def start_both(self, flt: IndexFilter, limit: int):
        """BM25 first, so it runs while the query is embedded; then dense."""
        self.start_embedding()
        sparse = self.start_bm25(flt, limit)
        return self.start_dense(flt, limit), sparse

    # --- joining (request thread)
    @staticmethod
    def result(call) -> list[Hit]:
        if isinstance(call, Bridged):
            return query_bridge.merged(_joined(call.asked), _joined(call.bridged),
                                       settings.SEARCH_QUERY_BRIDGE_WEIGHT, call.limit)
        return _joined(call) if isinstance(call, (Pending, Part)) else call

    def dense(self, flt: IndexFilter, limit: int, floor: float | None = None) -> list[Hit]:
        return self.result(self.start_dense(flt, limit, floor))

    def bm25(self, flt: IndexFilter, limit: int) -> list[Hit]:
        return self.result(self.start_bm25(flt, limit))

    def both(self, flt: IndexFilter, limit: int) -> tuple[list[Hit], list[Hit]]:
        dense, sparse = self.start_both(flt, limit)
        return self.result(dense), self.result(sparse)

    # --- the prefetch table
    def prefetch(self, flt: IndexFilter, ids: set, hits: tuple[list[Hit], list[Hit]]) -> None:
        self._prefetched[replace(flt, ids=())] = (ids, hits)

    def _from_prefetched(self, flt: IndexFilter, engine: int) -> list[Hit] | None:
        """A call for ids that a prefetch scored, with the same filter otherwise, answered from its result."""
        asked, hits = self._prefetched.get(replace(flt, ids=()), (set(), None))
        if not flt.ids or not asked.issuperset(flt.ids):
            return None
        # A subset of an engine's answer in its order: each hit's score does not depend on which
        # other ids were asked (exact cosine; BM25 with corpus-wide statistics).
        wanted = set(flt.ids)
        return [h for h in hits[engine] if h.id in wanted]
