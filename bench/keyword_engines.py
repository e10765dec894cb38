"""Keyword search at 100k rows: SQLite FTS5 beside tantivy and bm25s, on the same rows.

    python -m bench.keyword_engines [--rows 100000] [--queries 100] [--tenants 1]

Rows are real sentences (LoCoMo turns, CMRC passages: bench.latency's corpus), one memory each,
drawn with repetition, analysed once by retrieval.text.index_terms (the analysis every backend
shares); the engines index those terms (FTS5 and `TantivyKeywordIndex` through their backends, with
the same batches of 5,000 rows, analysis included in their build times; bare tantivy in memory
through a whitespace tokenizer; bm25s as token lists), so the same query terms reach each. Queries are real questions.
Times are wall milliseconds per top-10 search in this process, each engine in turn for each
question (so load weighs on all alike), and the calling thread's CPU milliseconds (every engine here
searches in the calling thread: tantivy's searcher with one segment at a time, bm25s with n_threads=1), with the filter every Loci search carries (tenant, KB,
status: one tenant holding all rows unless --tenants). Agreement: the share of FTS5's top 10 that
each engine also returns (FTS5's bm25() is the contract suite's reference; tantivy and bm25s
(method "robertson") use other idf smoothing, so small rank swaps are expected).
"""

import argparse
import json
import os
import shutil
import tempfile
import time

import numpy as np

from bench.harness import percentile
from bench.latency import corpus_sentences, questions


def stats(times):
    return {"p50": round(percentile(times, 50), 2), "p95": round(percentile(times, 95), 2)}


def _size(path) -> int:
    if os.path.isfile(path):
        return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--tenants", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loci.settings")
    import django

    django.setup()
    import bm25s
    import tantivy

    from retrieval.backends.base import IndexFilter, IndexRow
    from retrieval.backends.sqlite_fts import SqliteKeywordIndex
    from retrieval.backends.tantivy_keywords import TantivyKeywordIndex
    from retrieval.text import index_terms

    rng = np.random.default_rng(7)
    sentences = corpus_sentences()
    texts = [sentences[i] for i in rng.integers(len(sentences), size=args.rows)]
    tenants = rng.integers(args.tenants, size=args.rows) + 1
    t0 = time.perf_counter()
    terms = [index_terms(t) for t in texts]
    analysis = time.perf_counter() - t0
    qs = [questions()[i] for i in rng.choice(len(questions()), size=args.queries, replace=False)]
    out = {"rows": args.rows, "tenants": args.tenants, "queries": len(qs), "analysis seconds": round(analysis, 1),
           "load average before": round(os.getloadavg()[0], 2)}

    # FTS5, through the backend
    tmp = tempfile.mkdtemp(prefix="loci-kw-")
    fts = SqliteKeywordIndex({"path": os.path.join(tmp, "keyword.sqlite3")})
    t0 = time.perf_counter()
    for start in range(0, args.rows, 5000):
        fts.upsert([IndexRow(id=f"memory:{i}", tenant_id=int(tenants[i]), kb_id=1, kind="atomic_fact", text=texts[i])
                    for i in range(start, min(args.rows, start + 5000))])
    build = {"fts5": time.perf_counter() - t0}
    fts.close()  # a checkpoint: the size below is the file's, not a WAL's
    fts = SqliteKeywordIndex({"path": os.path.join(tmp, "keyword.sqlite3")})

    # the tantivy backend (retrieval/backends/tantivy_keywords.py), the same batches through the same API
    backend = TantivyKeywordIndex({"directory": os.path.join(tmp, "keyword-index")})
    t0 = time.perf_counter()
    for start in range(0, args.rows, 5000):
        backend.upsert([IndexRow(id=f"memory:{i}", tenant_id=int(tenants[i]), kb_id=1, kind="atomic_fact",
                                 text=texts[i]) for i in range(start, min(args.rows, start + 5000))])
    build["tantivy backend"] = time.perf_counter() - t0
    out["disk MB"] = {"fts5": round(_size(os.path.join(tmp, "keyword.sqlite3")) / 1e6, 1),
                      "tantivy backend": round(_size(os.path.join(tmp, "keyword-index")) / 1e6, 1)}

    # tantivy: one index in memory, terms joined by spaces, whitespace tokenizer; tenant as a u64 fast field
    schema = tantivy.SchemaBuilder()
    schema.add_text_field("text", tokenizer_name="ws")
    schema.add_unsigned_field("tenant", indexed=True, fast=True)
    schema.add_unsigned_field("row", stored=True, fast=True)
    schema = schema.build()
    tindex = tantivy.Index(schema, path=None)
    tindex.register_tokenizer("ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
    t0 = time.perf_counter()
    writer = tindex.writer(heap_size=128_000_000, num_threads=1)
    for i, words in enumerate(terms):
        doc = tantivy.Document()
        doc.add_text("text", " ".join(words))
        doc.add_unsigned("tenant", int(tenants[i]))
        doc.add_unsigned("row", i)
        writer.add_document(doc)
    writer.commit()
    writer.wait_merging_threads()
    tindex.reload()
    build["tantivy"] = time.perf_counter() - t0
    searcher = tindex.searcher()

    # bm25s: token lists; the tenant filter as a weight mask
    t0 = time.perf_counter()
    retriever = bm25s.BM25(method="robertson", k1=1.2, b=0.75)
    retriever.index([w if w else ["\x00"] for w in terms], show_progress=False)
    vocab = retriever.vocab_dict
    build["bm25s"] = time.perf_counter() - t0
    masks = {t: (tenants == t).astype(np.float32) for t in range(1, args.tenants + 1)}
    out["build seconds"] = {k: round(v, 1) for k, v in build.items()}

    times = {"fts5": [], "tantivy backend": [], "tantivy": [], "bm25s": []}
    cpu = {k: [] for k in times}  # this thread's CPU time: what load does not stretch (engine threads aside)
    agree = {"tantivy backend": [], "tantivy": [], "bm25s": []}
    # Rows repeat sentences, and copies of one sentence tie: which copy an engine returns is no disagreement.
    same_text = {k: [] for k in agree}

    def text_share(got, ref):
        wanted = {texts[int(i.split(":")[1])] for i in ref}
        return len({texts[int(i.split(":")[1])] for i in got} & wanted) / max(1, len(wanted))

    flt = IndexFilter(tenant_id=1, kb_ids=(1,))
    for q in qs:
        words = list(dict.fromkeys(index_terms(q)))[:64]
        if not words:
            continue
        t0, c0 = time.perf_counter(), time.thread_time()
        ref = [h.id for h in fts.search(q, flt, 10)]
        times["fts5"].append((time.perf_counter() - t0) * 1000)
        cpu["fts5"].append((time.thread_time() - c0) * 1000)

        t0, c0 = time.perf_counter(), time.thread_time()
        got = [h.id for h in backend.search(q, flt, 10)]  # analysis, filter, reload check and stored ids included
        times["tantivy backend"].append((time.perf_counter() - t0) * 1000)
        cpu["tantivy backend"].append((time.thread_time() - c0) * 1000)
        agree["tantivy backend"].append(len(set(got) & set(ref)) / max(1, len(ref)))
        same_text["tantivy backend"].append(text_share(got, ref))

        t0, c0 = time.perf_counter(), time.thread_time()
        should = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "text", w)) for w in words]
        query = tantivy.Query.boolean_query([
            (tantivy.Occur.Must, tantivy.Query.boolean_query(should)),
            (tantivy.Occur.Must, tantivy.Query.term_query(schema, "tenant", 1)),
        ])
        found = searcher.search(query, 10)
        got = [f"memory:{searcher.doc(addr)['row'][0]}" for _, addr in found.hits]
        times["tantivy"].append((time.perf_counter() - t0) * 1000)
        cpu["tantivy"].append((time.thread_time() - c0) * 1000)
        agree["tantivy"].append(len(set(got) & set(ref)) / max(1, len(ref)))
        same_text["tantivy"].append(text_share(got, ref))

        t0, c0 = time.perf_counter(), time.thread_time()
        known = [w for w in words if w in vocab]
        got = []
        if known:
            docs, scores = retriever.retrieve([known], k=10, show_progress=False, weight_mask=masks[1], n_threads=1)
            got = [f"memory:{d}" for d, s in zip(docs[0], scores[0]) if s > 0]
        times["bm25s"].append((time.perf_counter() - t0) * 1000)
        cpu["bm25s"].append((time.thread_time() - c0) * 1000)
        agree["bm25s"].append(len(set(got) & set(ref)) / max(1, len(ref)))
        same_text["bm25s"].append(text_share(got, ref))

    out["ms per search"] = {k: stats(v) for k, v in times.items()}
    out["CPU-ms per search (calling thread)"] = {k: stats(v) for k, v in cpu.items()}
    out["share of FTS5's top 10 also returned"] = {k: round(float(np.mean(v)), 3) for k, v in agree.items()}
    out["share of FTS5's top-10 texts also returned"] = {k: round(float(np.mean(v)), 3) for k, v in same_text.items()}
    out["load average after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
