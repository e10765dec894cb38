"""CPU of one search with a 2,000-character Chinese query, in total and by part (issue 30, item 1).

    flock /tmp/loci-heavy.lock python -m bench.cjk_query_cost [--size 5500] [--queries 5]

Rows are bench.latency's (CMRC and LoCoMo sentences, ten facts to an episode, in the database and
both indexes; the embedded vector index and SQLite FTS5), with the entities of the first 300
episodes linked. Each query is a different 2,000-character window of CMRC passages (so no query
cache answers), searched once per method; each part is then timed alone on the same queries.
CPU is the process's (time.process_time: every thread, the engine pools and ONNX Runtime's
included), so it is what the search costs the machine, not its wall time.
"""

import argparse
import json
import os
import statistics
import time

import numpy as np

from bench.harness import SHARED_DATA, make_scope, setup_django
from bench.latency import corpus_sentences, forget_queries, populate

QUERY_CHARS = 2000


def long_queries(n: int) -> list[str]:
    cmrc = json.loads((SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json").read_text())
    text = "".join(p["context"] for a in cmrc["data"] for p in a["paragraphs"])
    step = max(QUERY_CHARS, len(text) // (n + 1))
    return [text[i * step:i * step + QUERY_CHARS] for i in range(n)]


def cpu(fn) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=5500)
    parser.add_argument("--queries", type=int, default=5)
    args = parser.parse_args(argv)
    setup_django()
    from entities.actions import link_memories
    from entities.lookup import query_keys, recall
    from memory.models import Memory
    from retrieval.backends import keyword_index
    from retrieval.embeddings import embedder
    from retrieval.request import parse_search_request
    from retrieval.search import permission_filter, search
    from retrieval.text import index_terms

    scope, kb = make_scope()
    texts = corpus_sentences()[:600]
    vectors = np.asarray(embedder().embed_documents(texts), dtype=np.float32)
    populate(args.size, texts, vectors, scope, kb, np.random.default_rng(7))
    link_memories(list(Memory.objects.filter(kind="episode").order_by("ordinal")[:300]))
    queries = long_queries(args.queries)
    search(scope, parse_search_request({"query": "热身", "method": "hybrid"}))  # models and partitions loaded

    from retrieval.embeddings import e5_onnx

    print(f"{len(queries)} queries of {QUERY_CHARS} characters, {args.size} memories; load {os.getloadavg()}")
    print(f"distinct BM25 terms per query: {statistics.median(len(set(index_terms(q))) for q in queries):.0f}; "
          f"entity keys: {statistics.median(len(query_keys(q)) for q in queries):.0f}")
    flt = permission_filter(scope, parse_search_request({"query": "x"}))
    table = {}
    # Before: a query embedded from all its windows (as before issue 30's cap); after: its first one.
    for label, windows in (("every window", None), ("first window (now)", e5_onnx.QUERY_WINDOWS)):
        e5_onnx.QUERY_WINDOWS = windows
        for method in ("keyword", "vector", "hybrid"):
            forget_queries()
            table.setdefault(f"search, {method}", {})[label] = [cpu(lambda q=q, m=method: search(
                scope, parse_search_request({"query": q, "method": m}))) for q in queries]
        forget_queries()
        table.setdefault("search, hybrid, + 1,000 document ids (the costliest allowed)", {})[label] = [
            cpu(lambda q=q: search(scope, parse_search_request(
                {"query": q, "method": "hybrid", "filters": {"document_id": list(range(1, 1001))}})))
            for q in queries]
        forget_queries()
        table.setdefault("query embedding", {})[label] = [cpu(lambda q=q: embedder().embed_query(q)) for q in queries]
    table["jieba + stems (index_terms)"] = {"first window (now)": [cpu(lambda q=q: index_terms(q)) for q in queries]}
    table["keyword engine call"] = {"first window (now)": [cpu(lambda q=q: keyword_index().search(q, flt, 10))
                                                           for q in queries]}
    table["entity lookup (recall)"] = {"first window (now)": [cpu(lambda q=q: recall(q, flt)) for q in queries]}
    print(f"load after: {os.getloadavg()}")
    print("| part | CPU ms, every window (median / max) | CPU ms, first window (median / max) |")
    print("|---|---|---|")
    for name, by in table.items():
        cells = [f"{statistics.median(by[k]) * 1000:.0f} / {max(by[k]) * 1000:.0f}" if k in by else "—"
                 for k in ("every window", "first window (now)")]
        print(f"| {name} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
