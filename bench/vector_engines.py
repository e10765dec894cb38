"""In-process vector scoring on Loci's own rows: numpy against faiss, exact and approximate, with filters.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python -m bench.vector_engines [--rows 100000] [--queries 100]
                                                [--base-texts 2000] [--approximate]

Rows are built as bench.latency builds them: real LoCoMo and CMRC sentences embedded by the
configured embedder (e5-small-onnx by default), each reused with a little noise, so the vectors
cluster as real memories do. Queries are real questions, embedded as queries. Times are CPU
milliseconds per query in one thread (`time.process_time`), so a neighbour's load on a shared
machine weighs less than on wall time; every engine runs over the same rows and queries in one run.

- "10 % match": the filter lets through one row in ten (a tenant among ten in a shared table set);
  "all match": every row passes (one tenant's facts).
- `backend`: retrieval.backends.sqlite_vectors end to end (version check, filter, score, hits).
- With --approximate: faiss IVF (nlist 4*sqrt(rows)) and HNSW (M 32), recall@20 against the exact
  top 20 under the same filters, and the bytes each holds per row.
"""

import argparse
import json
import os
import tempfile
import time

import numpy as np

from bench.harness import percentile
from bench.latency import corpus_sentences, questions


def cpu_ms(fn, queries) -> dict:
    times = []
    for q in queries:
        t0 = time.process_time()
        fn(q)
        times.append((time.process_time() - t0) * 1000)
    return {"p50": round(percentile(times, 50), 2), "p95": round(percentile(times, 95), 2)}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--base-texts", type=int, default=2000)
    parser.add_argument("--approximate", action="store_true")
    parser.add_argument("--hnsw", action="store_true", help="with --approximate: also HNSW (slow to build)")
    parser.add_argument("--no-backend", action="store_true", help="skip the backend (its file) at large sizes")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loci.settings")
    import django

    django.setup()
    import faiss

    from retrieval.embeddings import embedder

    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(7)
    texts = corpus_sentences()
    picked = [texts[i] for i in rng.choice(len(texts), size=args.base_texts, replace=False)]
    t0 = time.perf_counter()
    base = np.asarray(embedder().embed_documents(picked), dtype=np.float32)
    qs = [questions()[i] for i in rng.choice(len(questions()), size=args.queries, replace=False)]
    queries = np.stack([np.asarray(embedder().embed_query(q), dtype=np.float32) for q in qs])
    embed_seconds = time.perf_counter() - t0
    n, dim = args.rows, base.shape[1]
    matrix = base[rng.integers(len(base), size=n)] + rng.normal(0, 0.02, size=(n, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    tenant = rng.integers(10, size=n)  # ten tenants sharing the table set
    mine = np.flatnonzero(tenant == 3)
    k = 20
    out = {"rows": n, "dim": dim, "queries": len(qs), "embedding seconds": round(embed_seconds, 1),
           "load average before": round(os.getloadavg()[0], 2), "CPU ms per query": {}}
    res = out["CPU ms per query"]

    def numpy_all(q):
        s = matrix @ q
        return np.argpartition(-s, k)[:k]

    def numpy_filtered(q):
        s = matrix[mine] @ q
        return mine[np.argpartition(-s, k)[:k]]

    def numpy_filtered_full(q):  # one product over every row, then the filter's rows picked
        s = (matrix @ q)[mine]
        return mine[np.argpartition(-s, k)[:k]]

    res["numpy, all match"] = cpu_ms(numpy_all, queries)
    res["numpy gather, 10 % match"] = cpu_ms(numpy_filtered, queries)
    res["numpy full product, 10 % match"] = cpu_ms(numpy_filtered_full, queries)

    flat = faiss.IndexFlatIP(dim)
    flat.add(matrix)
    bitmap = np.zeros((n + 7) // 8, dtype=np.uint8)
    for i in mine:
        bitmap[i >> 3] |= 1 << (i & 7)
    selector = faiss.IDSelectorBitmap(n, faiss.swig_ptr(bitmap))
    params = faiss.SearchParameters(sel=selector)
    res["faiss IndexFlatIP, all match"] = cpu_ms(lambda q: flat.search(q[None, :], k), queries)
    res["faiss IndexFlatIP + IDSelectorBitmap, 10 % match"] = cpu_ms(
        lambda q: flat.search(q[None, :], k, params=params), queries)
    res["faiss knn on the gathered rows, 10 % match"] = cpu_ms(
        lambda q: faiss.knn(q[None, :], matrix[mine], k, metric=faiss.METRIC_INNER_PRODUCT), queries)

    if not args.no_backend:
        backend(args, out, res, matrix, tenant, mine, queries, k)
    if args.approximate:
        approximate(args, out, matrix, mine, queries, k, numpy_all, numpy_filtered, rng)
    out["load average after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=2))


def backend(args, out, res, matrix, tenant, mine, queries, k):
    from retrieval.backends.base import IndexFilter, IndexRow
    from retrieval.backends.sqlite_vectors import SqliteVectorIndex

    n = len(matrix)
    # The backend end to end: the same rows in a file, one tenant's tenth in its own partition.
    path = os.path.join(tempfile.mkdtemp(prefix="loci-vec-"), "vectors.sqlite3")
    index = SqliteVectorIndex({"path": path})
    t0 = time.perf_counter()
    for start in range(0, n, 5000):
        index.upsert([IndexRow(id=f"memory:{i}", tenant_id=int(tenant[i]), kb_id=1, kind="atomic_fact",
                               vector=matrix[i].tolist()) for i in range(start, min(n, start + 5000))])
    out["backend write seconds"] = round(time.perf_counter() - t0, 1)
    all_kbs = IndexFilter(tenant_id=3, kb_ids=(1,))
    t0 = time.perf_counter()
    index.search(queries[0].tolist(), all_kbs, k)
    out["backend first search (load) seconds"] = round(time.perf_counter() - t0, 2)
    res["backend (sqlite_vectors), one tenant's partition"] = cpu_ms(
        lambda q: index.search(q.tolist(), all_kbs, k), queries)
    some_ids = tuple(f"memory:{i}" for i in mine[:60])
    res["backend, 60 ids picked (mRAG rescoring)"] = cpu_ms(
        lambda q: index.search(q.tolist(), IndexFilter(tenant_id=3, kb_ids=(1,), ids=some_ids), k), queries)
    # Catch-up after another process's write: one row changed, then a search.
    other = SqliteVectorIndex({"path": path})
    times = []
    for i, q in enumerate(queries[:30]):
        other.upsert([IndexRow(id=f"memory:{mine[i]}", tenant_id=3, kb_id=1, kind="atomic_fact",
                               vector=matrix[mine[i]].tolist())])
        t0 = time.process_time()
        index.search(q.tolist(), all_kbs, k)
        times.append((time.process_time() - t0) * 1000)
    res["backend, search after another process wrote a row"] = {"p50": round(percentile(times, 50), 2),
                                                                "p95": round(percentile(times, 95), 2)}
    out["backend file bytes per row"] = round(os.path.getsize(path) / n)


def approximate(args, out, matrix, mine, queries, k, numpy_all, numpy_filtered, rng):
    import faiss

    n, dim = matrix.shape
    exact = [set(numpy_all(q).tolist()) for q in queries]
    exact_mine = [set(numpy_filtered(q).tolist()) for q in queries]
    approx = out["approximate, all match"] = {}
    nlist = int(4 * np.sqrt(n))
    quantizer = faiss.IndexFlatIP(dim)
    ivf = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    t0 = time.process_time()
    ivf.train(matrix[rng.choice(n, size=min(n, 40 * nlist), replace=False)])
    ivf.add(matrix)
    build = time.process_time() - t0
    for nprobe in (8, 16, 32, 64):
        ivf.nprobe = nprobe
        found = [set(ivf.search(q[None, :], k)[1][0].tolist()) for q in queries]
        approx[f"IVF{nlist},Flat nprobe {nprobe}"] = {
            **cpu_ms(lambda q: ivf.search(q[None, :], k), queries),
            "recall@20": round(float(np.mean([len(f & e) / k for f, e in zip(found, exact)])), 4),
            "build CPU s": round(build, 1), "bytes per row": dim * 4 + 8}
    bitmap = np.zeros((n + 7) // 8, dtype=np.uint8)
    for i in mine:
        bitmap[i >> 3] |= 1 << (i & 7)
    selector = faiss.IDSelectorBitmap(n, faiss.swig_ptr(bitmap))
    for nprobe in (16, 64):
        params = faiss.SearchParametersIVF(sel=selector, nprobe=nprobe)
        found = [set(ivf.search(q[None, :], k, params=params)[1][0].tolist()) for q in queries]
        approx[f"IVF{nlist},Flat nprobe {nprobe} + IDSelectorBitmap, 10 % match"] = {
            **cpu_ms(lambda q: ivf.search(q[None, :], k, params=params), queries),
            "recall@20": round(float(np.mean([len(f & e) / k for f, e in zip(found, exact_mine)])), 4)}
    if not args.hnsw:
        return
    hnsw = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
    t0 = time.process_time()
    hnsw.add(matrix)
    build = time.process_time() - t0
    for ef in (64, 128):
        hnsw.hnsw.efSearch = ef
        found = [set(hnsw.search(q[None, :], k)[1][0].tolist()) for q in queries]
        approx[f"HNSW32 efSearch {ef}"] = {
            **cpu_ms(lambda q: hnsw.search(q[None, :], k), queries),
            "recall@20": round(float(np.mean([len(f & e) / k for f, e in zip(found, exact)])), 4),
            "build CPU s": round(build, 1), "bytes per row": dim * 4 + 32 * 2 * 4 + 8}


if __name__ == "__main__":
    main()
