"""Where one search's milliseconds go: a per-stage and per-engine-call trace at each size.

    python -m bench.search_profile [--sizes 10000,100000] [--queries 60] [--method hybrid] [--cprofile]
                                   [--var-dir DIR]

`--var-dir` traces over the data a `bench.latency --var-dir DIR` run kept (one size) instead of
loading new rows.

The data are bench.latency's (real sentences, ten facts to an episode, in the database and both
indexes). Every stage function of retrieval.search.hybrid, every engine call (query embedding,
vector search, keyword search) and every database read of the response is wrapped with a timer for
the run (the bench patches the modules it loaded; nothing in the code path changes). Stages run in
the request thread, engine calls on the engine pools, so engine times overlap stage times: a stage's
time is the request thread's, including its waits. `--cprofile` adds the request thread's top
functions by cumulative time (the pool threads are not profiled: their time is the engine rows).
"""

import argparse
import cProfile
import functools
import io
import json
import logging
import pstats
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench.harness import percentile, setup_django
from bench.latency import OFF, STAGES, corpus_sentences, forget_queries, populate, questions

_spans: dict[str, list[float]] = defaultdict(list)
_current: dict[str, float] = defaultdict(float)
_lock = threading.Lock()


def _timed(name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            ms = (time.perf_counter() - t0) * 1000
            with _lock:
                _current[name] += ms
                _current[f"{name} (calls)"] += 1
    return wrapper


def instrument() -> None:
    from retrieval import results
    from retrieval.backends.milvus import MilvusVectorIndex
    from retrieval.backends.sqlite_vectors import SqliteVectorIndex
    from retrieval.backends.sqlite_fts import SqliteKeywordIndex
    from retrieval.backends.tantivy_keywords import TantivyKeywordIndex
    from retrieval.embeddings.cache import CachedEmbedder
    from retrieval.search import hybrid, memory_kinds, pipeline, scoring

    MilvusVectorIndex.search = _timed("engine: vector search", MilvusVectorIndex.search)
    SqliteVectorIndex.search_many = _timed("engine: vector search", SqliteVectorIndex.search_many)
    SqliteKeywordIndex.search = _timed("engine: keyword search", SqliteKeywordIndex.search)
    TantivyKeywordIndex.search = _timed("engine: keyword search", TantivyKeywordIndex.search)
    CachedEmbedder.embed_query = _timed("engine: query embedding", CachedEmbedder.embed_query)
    for name in ("coarse_recall", "prefetch_recalled", "fuse", "episodes_of_facts", "fact_scorer", "expand"):
        setattr(hybrid, name, _timed(f"stage: {name}", getattr(hybrid, name)))
    scoring.spread_over_messages = _timed("stage: spread_over_messages", scoring.spread_over_messages)
    hybrid.CosineShifts.preload = _timed("db: cosine-shift texts (preload)", hybrid.CosineShifts.preload)
    hybrid.CosineShifts.__call__ = _timed("db: cosine-shift texts", hybrid.CosineShifts.__call__)
    hybrid.entity_recall = _timed("stage: entity_recall (DB)", hybrid.entity_recall)
    hybrid.pulled_in = _timed("stage: entity pulled_in", hybrid.pulled_in)
    for name in ("mrag_response", "flat_response", "load_memories", "texts", "raw_messages"):
        setattr(results, name, _timed(f"db: results.{name}", getattr(results, name)))
    import retrieval.search as search_pkg

    search_pkg.add_profiles_and_foresight = _timed("stage: profiles and foresight", memory_kinds.add_profiles_and_foresight)
    search_pkg.permission_filter = _timed("stage: permission_filter", search_pkg.permission_filter)
    pipeline.assign_ranks = _timed("stage: assign_ranks", pipeline.assign_ranks)
    from retrieval.search.order import PIPELINE

    for stage in PIPELINE:  # every pipeline stage's whole time (tense, the floor, raw messages…)
        stage.run = _timed(f"pipeline: {stage.name}", stage.run)


def trace(scope, queries: list[str], method: str, profiler: cProfile.Profile | None) -> dict:
    from django.test import override_settings

    from retrieval.request import parse_search_request
    from retrieval.search import search

    for q in queries:
        forget_queries()
        _current.clear()
        if profiler:
            profiler.enable()
        t0 = time.perf_counter()
        with override_settings(**STAGES.get(method, OFF)):  # as bench.latency times each method
            search(scope, parse_search_request({"query": q, "method": method.split("+")[0], "top_k": 10}))
        total = (time.perf_counter() - t0) * 1000
        if profiler:
            profiler.disable()
        with _lock:
            for name, ms in _current.items():
                _spans[name].append(ms)
            _spans["total"].append(total)
    n = len(queries)
    out = {}
    for name, values in sorted(_spans.items(), key=lambda kv: -sum(kv[1])):
        if name.endswith("(calls)"):
            out[name] = round(sum(values) / n, 1)
            continue
        padded = values + [0.0] * (n - len(values))  # a stage some searches skip counts 0 there
        out[name] = {"mean": round(sum(padded) / n, 1), "p50": round(percentile(padded, 50), 1),
                     "p95": round(percentile(padded, 95), 1)}
    _spans.clear()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--method", default="hybrid")
    parser.add_argument("--base-texts", type=int, default=1000)
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--var-dir", help="trace over the rows bench.latency kept in DIR (its one size)")
    args = parser.parse_args(argv)
    kept = json.loads((Path(args.var_dir) / "latency-data.json").read_text()) if args.var_dir else None
    if kept:
        args.sizes = ",".join(str(s) for s in kept["sizes"])
    setup_django(args.var_dir)
    logging.disable(logging.INFO)
    from bench.harness import make_scope
    from retrieval.embeddings import embedder

    rng = np.random.default_rng(7)
    texts = corpus_sentences()
    picked = [texts[i] for i in rng.choice(len(texts), size=min(args.base_texts, len(texts)), replace=False)]
    vectors = None if kept else np.asarray(embedder().embed_documents(picked), dtype=np.float32)
    qs = [questions()[i] for i in rng.choice(len(questions()), size=args.queries + 20, replace=False)]
    instrument()
    total = 0
    for size in sorted(int(s) for s in args.sizes.split(",")):
        scope, kb = make_scope("latency", "latency")
        if not kept:
            populate(size - total, picked, vectors, scope, kb, rng)
        total = size
        trace(scope, qs[:20], args.method, None)  # warm-up
        profiler = cProfile.Profile() if args.cprofile else None
        out = trace(scope, qs[20:], args.method, profiler)
        print(json.dumps({"size": size, "method": args.method, "trace": out}, indent=1), flush=True)
        if profiler:
            buf = io.StringIO()
            pstats.Stats(profiler, stream=buf).sort_stats("cumulative").print_stats(40)
            print(buf.getvalue(), flush=True)


if __name__ == "__main__":
    main()
