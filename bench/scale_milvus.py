"""One tenant's million memories on the Milvus 2.3.5 standalone the tests start: hybrid's vector calls and the server's RSS.

    python -m bench.scale_milvus [--rows 1000000] [--queries 100] [--batch 2000]

Synthetic rows, not ingested memories: generating a million real embeddings is out of reach on two
shared cores (the ONNX embedder does ~100 short passages a second), so `--base-texts` real LoCoMo
and CMRC sentences are embedded and every row is one of those vectors with a little noise, ten facts
to an episode as in bench.latency; the cost of a search does not depend on what the vectors mean.
Only the vector index holds them (no database rows, no keyword index), so what is timed is what
hybrid asks Milvus per search, in its order, through `MilvusVectorIndex`:

1. the episode recall and the fact recall, started together (hybrid's coarse recall),
2. then one exhaustive search over the recalled episodes' facts and the recalled facts' parents
   (`prefetch_recalled`), which needs 1's answers;

and a single vector search (the `vector` method's one call) for the ratio. The query embedding is
timed apart. The server's resident memory (its process tree, /proc) is read empty, after loading,
and after the searches.
"""

import argparse
import json
import logging
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from bench.harness import percentile, setup_django
from bench.latency import FACTS_PER_EPISODE, corpus_sentences, questions


def rss_mb(pid: int) -> float:
    """Resident memory of `pid` and its descendants, MB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{p}/task").iterdir():
                children = (task / "children").read_text().split()
                todo += [int(c) for c in children]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return round(total / 1024, 1)


def rows_of(start_episode: int, episodes: int, vectors: np.ndarray, rng):
    from retrieval.backends.base import IndexRow

    out = []
    for e in range(start_episode, start_episode + episodes):
        i = int(rng.integers(len(vectors)))
        ids = [f"memory:e{e}"] + [f"memory:f{e}-{j}" for j in range(FACTS_PER_EPISODE)]
        base = vectors[[(i + max(0, k - 1)) % len(vectors) for k in range(len(ids))]]
        noisy = base + rng.normal(0, 0.02, size=base.shape).astype(np.float32)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        for k, (row_id, vec) in enumerate(zip(ids, noisy)):
            out.append(IndexRow(id=row_id, tenant_id=1, kb_id=1, document_id=0,
                                kind="episode" if k == 0 else "atomic_fact",
                                parent_id="" if k == 0 else ids[0], vector=vec.tolist(), text=""))
    return out


def measure(index, client, name: str, qvecs, n_inserted: int, index_wait: float, pid: int) -> dict:
    """Flush, wait for the index build, then time hybrid's vector calls and one vector search per query."""
    from dataclasses import replace

    from django.conf import settings

    from retrieval.backends.base import IndexFilter

    out = {"rows": n_inserted, "load average before": [round(x, 1) for x in os.getloadavg()]}
    t0 = time.perf_counter()
    client.flush(name)  # seal the growing segments so that the index node builds their IVF index
    deadline = time.monotonic() + index_wait
    while time.monotonic() < deadline:
        info = client.describe_index(name, "vector")
        if int(info.get("indexed_rows", 0)) >= n_inserted and info.get("state") == "Finished":
            break
        time.sleep(5)
    out["flush + index seconds"] = round(time.perf_counter() - t0)
    out["index"] = {k: v for k, v in client.describe_index(name, "vector").items()
                    if k in ("index_type", "indexed_rows", "total_rows", "pending_index_rows", "state")}
    out["server RSS before searches (MB)"] = rss_mb(pid)
    times = {k: [] for k in ("vector method: one search", "hybrid: recalls together", "hybrid: prefetch after",
                             "hybrid: vector calls in all")}
    base = IndexFilter(tenant_id=1, kb_ids=(1,))
    n_episodes = min(settings.MRAG_EPISODE_MULTIPLIER * 10, settings.MRAG_MAX_EPISODES)
    for warm in (True, False):
        for qv in (qvecs[:10] if warm else qvecs):
            t0 = time.perf_counter()
            index.search(qv, replace(base, kinds=("episode", "atomic_fact")), 10, min_score=settings.VECTOR_MIN_SIMILARITY)
            one = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            found = {}
            calls = [threading.Thread(target=lambda k=k: found.__setitem__(
                k, index.search(qv, replace(base, kinds=(k,)), n_episodes))) for k in ("episode", "atomic_fact")]
            for c in calls:
                c.start()
            for c in calls:
                c.join()
            recalls = (time.perf_counter() - t0) * 1000
            recalled = [h.id for h in found["episode"]]
            parents = [h.extra["parent_id"] for h in found["atomic_fact"]]
            t1 = time.perf_counter()
            flt = replace(base, kinds=("episode", "atomic_fact"), parent_ids=tuple(dict.fromkeys(recalled + parents)),
                          or_ids=tuple(dict.fromkeys(parents)))
            index.search(qv, flt, 16384)
            prefetch = (time.perf_counter() - t1) * 1000
            if not warm:
                for key, ms in zip(times, (one, recalls, prefetch, recalls + prefetch)):
                    times[key].append(ms)
    out["latency ms (p50, p95)"] = {k: [round(percentile(v, 50), 1), round(percentile(v, 95), 1)]
                                    for k, v in times.items()}
    out["server RSS after searches (MB)"] = rss_mb(pid)
    out["load average after"] = [round(x, 1) for x in os.getloadavg()]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="250000,500000,1000000",
                        help="row counts to measure at, in one growing collection (each result is printed at once)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--base-texts", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=2000, help="rows per upsert call to the backend")
    parser.add_argument("--index-wait", type=float, default=900, help="seconds to wait for the index build")
    args = parser.parse_args(argv)
    setup_django()
    logging.disable(logging.INFO)
    from django.conf import settings

    from retrieval.embeddings import embedder
    from tests.index_fixtures import EMBEDDED_MILVUS_TOKEN, EmbeddedMilvusServer

    rng = np.random.default_rng(7)
    texts = corpus_sentences()
    picked = [texts[i] for i in rng.choice(len(texts), size=min(args.base_texts, len(texts)), replace=False)]
    vectors = np.asarray(embedder().embed_documents(picked), dtype=np.float32)
    qs = [questions()[i] for i in rng.choice(len(questions()), size=args.queries, replace=False)]
    forget = getattr(embedder(), "clear_query_cache", lambda: None)
    qvecs, embed_ms = [], []
    for q in qs:
        forget()
        t0 = time.perf_counter()
        qvecs.append([float(x) for x in embedder().embed_query(q)])
        embed_ms.append((time.perf_counter() - t0) * 1000)

    server = EmbeddedMilvusServer(Path(tempfile.mkdtemp(prefix="loci-scale-milvus-")))
    uri = server.start()
    try:
        from retrieval.backends.milvus import MilvusVectorIndex

        index = MilvusVectorIndex({**settings.LOCI_VECTOR_INDEX["OPTIONS"], "uri": uri, "token": EMBEDDED_MILVUS_TOKEN,
                                   "collection_prefix": "scale"})
        index.ping()
        print(json.dumps({"embedder": settings.LOCI_EMBEDDER, "consistency": index.consistency,
                          "query embedding ms (p50, p95)": [round(percentile(embed_ms, 50), 1),
                                                            round(percentile(embed_ms, 95), 1)],
                          "server RSS empty (MB)": rss_mb(server.proc.pid)}), flush=True)
        t0, cpu0 = time.perf_counter(), time.process_time()
        per_batch = max(1, args.batch // (FACTS_PER_EPISODE + 1))
        done = 0
        for target in sorted(int(r) for r in args.rows.split(",")):
            episodes = target // (FACTS_PER_EPISODE + 1)
            for start in range(done, episodes, per_batch):
                index.upsert(rows_of(start, min(per_batch, episodes - start), vectors, rng))
            done = max(done, episodes)
            inserted = done * (FACTS_PER_EPISODE + 1)
            result = {"insert seconds so far (wall, client CPU)": [round(time.perf_counter() - t0),
                                                                   round(time.process_time() - cpu0)]}
            result.update(measure(index, index._client(), "scale_384", qvecs, inserted, args.index_wait,
                                  server.proc.pid))
            print(json.dumps(result), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
