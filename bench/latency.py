"""Search latency per method at 10k and 100k memories on the embedded stack (query embedding included).

    python -m bench.latency [--sizes 10000,100000] [--queries 200] [--embedded-milvus-server]
                            [--var-dir DIR] [--answers FILE]

With `--var-dir` the data live in DIR and are kept: a second run with the same DIR, sizes and seed
only measures (so two checkouts can be timed on the same rows, alternately, by running each with
the same DIR); `--answers` writes every search's ids and scores, to check that two checkouts answer
alike.

With `--embedded-milvus-server` the vector index is a Milvus 2.3.5 standalone started for the run
(the `milvus` wheel of the test extra, as the scale-out tests use) instead of Milvus Lite; with
MILVUS_URI (and MILVUS_TOKEN) set, it is that server.

Each question is searched with every method in turn (not all questions with one method, then the
next), so a neighbour's load on a shared machine weighs on every method alike and the ratios
between methods stay meaningful. The load average is reported with each size.

Memories are real sentences (LoCoMo turns and CMRC passages) grouped ten facts to an episode. Only
a few thousand distinct texts are embedded; the other rows reuse those vectors with a little noise,
since the cost of a search does not depend on what the vectors mean. Rows go into the database
(search hydrates its hits from it) and both index projections, exactly as the pipeline writes them.
"""

import argparse
import json
import logging
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from bench.harness import SHARED_DATA, percentile, setup_django

FACTS_PER_EPISODE = 10
BASE_TEXTS = 3000


def corpus_sentences() -> list[str]:
    locomo = json.loads((SHARED_DATA / "locomo" / "locomo10_dev.json").read_text())
    out = []
    for conv in locomo:
        c = conv["conversation"]
        for key, turns in c.items():
            if key.startswith("session_") and isinstance(turns, list):
                out += [f"{t['speaker']}: {t['text']}" for t in turns]
    cmrc = json.loads((SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json").read_text())
    for article in cmrc["data"]:
        for p in article["paragraphs"]:
            out += [s for s in re.split(r"(?<=[。！？])", p["context"]) if len(s) > 8]
    return out


def questions() -> list[str]:
    locomo = json.loads((SHARED_DATA / "locomo" / "locomo10_dev.json").read_text())
    cmrc = json.loads((SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json").read_text())
    qs = [qa["question"] for conv in locomo for qa in conv["qa"]]
    qs += [qa["question"] for a in cmrc["data"] for p in a["paragraphs"] for qa in p["qas"]]
    return [q for q in qs if q.strip()]  # a blank question (one CMRC entry) would be a 400, not a search


LATE = "hybrid+late-interaction"  # hybrid with the late-interaction stage on (its vectors stored as ingestion does)
COVERAGE = "hybrid+coverage"  # hybrid with the coverage stage alone (SEARCH_COVERED_WEIGHT 0.5: a wider candidate list)
BOTH = "hybrid+late-interaction+coverage"
LATE_100 = "hybrid+late-interaction@100"  # the stage rescoring 100 candidates instead of 30
LATE_20 = "hybrid+late-interaction@20"
STAGES = {LATE: {"SEARCH_LATE_INTERACTION": True, "SEARCH_COVERED_WEIGHT": 1.0},
          COVERAGE: {"SEARCH_LATE_INTERACTION": False, "SEARCH_COVERED_WEIGHT": 0.5},
          BOTH: {"SEARCH_LATE_INTERACTION": True, "SEARCH_COVERED_WEIGHT": 0.5},
          LATE_100: {"SEARCH_LATE_INTERACTION": True, "SEARCH_COVERED_WEIGHT": 1.0,
                     "SEARCH_LATE_INTERACTION_CANDIDATES": 100},
          LATE_20: {"SEARCH_LATE_INTERACTION": True, "SEARCH_COVERED_WEIGHT": 1.0,
                    "SEARCH_LATE_INTERACTION_CANDIDATES": 20}}
OFF = {"SEARCH_LATE_INTERACTION": False, "SEARCH_COVERED_WEIGHT": 1.0}  # every other method: the stages off


def populate(size: int, texts: list[str], vectors: np.ndarray, scope, kb, rng, token_vectors: bool = False) -> None:
    from memory.models import Memory
    from retrieval.backends import keyword_index, vector_index
    from retrieval.projection import row_for_memory

    exclusive = False
    made = 0
    batch_rows = []
    episodes_needed = size // (FACTS_PER_EPISODE + 1)
    for e in range(episodes_needed):
        i = rng.integers(len(texts))
        episode = Memory(tenant=scope.tenant, kb=kb, kind="episode", text=" ".join(texts[(i + j) % len(texts)]
                                                                                   for j in range(3)),
                         topic=f"topic {e}", ordinal=e)
        facts = [Memory(tenant=scope.tenant, kb=kb, kind="atomic_fact", parent=episode, ordinal=j,
                        text=texts[(i + j) % len(texts)], topic=episode.topic) for j in range(FACTS_PER_EPISODE)]
        for m in (episode, *facts):
            m.content_hash = Memory.hash_text(m.text)
        Memory.objects.bulk_create([episode])
        Memory.objects.bulk_create(facts)
        for offset, m in enumerate((episode, *facts)):
            row = row_for_memory(m)
            base = vectors[(i + max(0, offset - 1)) % len(texts)]
            noisy = base + rng.normal(0, 0.02, size=base.shape).astype(np.float32)
            row.vector = (noisy / np.linalg.norm(noisy)).tolist()
            batch_rows.append(row)
        made += 1 + FACTS_PER_EPISODE
        if token_vectors:
            store_token_vectors((episode, *facts))
        if len(batch_rows) >= 2000:
            vector_index().upsert(batch_rows, exclusive=exclusive)
            keyword_index().upsert(batch_rows, exclusive=exclusive)
            batch_rows = []
    if batch_rows:
        vector_index().upsert(batch_rows, exclusive=exclusive)
        keyword_index().upsert(batch_rows, exclusive=exclusive)


_matrices: dict[str, bytes] = {}


def store_token_vectors(memories) -> None:
    """The late-interaction rows ingestion writes (retrieval/backends/token_vectors.py), one encoding per distinct text."""
    from retrieval.backends import token_vectors
    from retrieval.runtimes import colbert
    from retrieval.models import TokenVectors

    model = token_vectors.model()
    new = [m.text for m in memories if m.text not in _matrices]
    for text, matrix in zip(new, model.encode_documents(new) if new else []):
        _matrices[text] = colbert.quantise(matrix).tobytes()
    TokenVectors.objects.bulk_create([
        TokenVectors(memory=m, model=model.name, text_sha=token_vectors.text_sha(m.text),
                     tokens=len(_matrices[m.text]) // colbert.DIM, data=_matrices[m.text]) for m in memories])


def forget_queries() -> None:
    """Empty the in-memory cache of query vectors, so each timed search embeds its query as a new one would."""
    from retrieval.embeddings import embedder

    built = embedder()
    for part in (built, getattr(built, "primary", None), getattr(built, "fallback", None)):
        getattr(part, "clear_query_cache", lambda: None)()


def answer(response: dict) -> dict:
    """A search's ids and scores (the API's 6 decimals), list by list, nested facts included."""
    out = {}
    for key in ("episodes", "facts", "chunks"):
        out[key] = [(it["id"], it["score"], [(f["id"], f["score"]) for f in it.get("atomic_facts", [])])
                    for it in response.get(key, [])]
    return out


def measure(scope, queries: list[str], methods, answers: dict | None = None) -> dict:
    from django.test import override_settings

    from retrieval.embeddings import embedder
    from retrieval.request import parse_search_request
    from retrieval.search import search

    times = {method: [] for method in [*methods, "query embedding alone"]}
    # CPU of this whole process per search (every thread: the pools', the ONNX runtime's): on a shared
    # machine wall time is mostly waiting for a core. An index server's own CPU is not in it.
    cpu = {method: [] for method in methods}
    load_before = os.getloadavg()[0]
    for q in queries:
        for method in methods:
            forget_queries()
            with override_settings(**STAGES.get(method, OFF)):
                t0, c0 = time.perf_counter(), time.process_time()
                found = search(scope, parse_search_request({"query": q, "method": method.split("+")[0], "top_k": 10}))
                times[method].append((time.perf_counter() - t0) * 1000)
                cpu[method].append((time.process_time() - c0) * 1000)
            if answers is not None:
                answers[f"{method}|{q}"] = answer(found)
        forget_queries()
        t0 = time.perf_counter()
        embedder().embed_query(q)
        times["query embedding alone"].append((time.perf_counter() - t0) * 1000)
    out = {name: {"p50": round(percentile(t, 50), 1), "p95": round(percentile(t, 95), 1)} for name, t in times.items()}
    if "hybrid" in out and "vector" in out:
        out["hybrid / vector"] = {q: round(out["hybrid"][q] / out["vector"][q], 2) for q in ("p50", "p95")}
    for staged in STAGES:
        if "hybrid" in out and staged in out:
            out[f"{staged} / hybrid"] = {q: round(out[staged][q] / out["hybrid"][q], 2) for q in ("p50", "p95")}
    out["process CPU ms per search"] = {m: {"p50": round(percentile(t, 50), 1), "p95": round(percentile(t, 95), 1)}
                                        for m, t in cpu.items()}
    out["load average (1 min) before, after"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--methods", default="keyword,vector,hybrid")
    parser.add_argument("--base-texts", type=int, default=BASE_TEXTS, help="distinct texts actually embedded")
    parser.add_argument("--embedded-milvus-server", action="store_true",
                        help="run against a Milvus 2.3.5 standalone started for the run (needs the test extra)")
    parser.add_argument("--var-dir", help="keep the data here; a later run with the same DIR only measures")
    parser.add_argument("--answers", help="write every search's ids and scores to this JSON file")
    args = parser.parse_args(argv)
    if args.embedded_milvus_server:
        with _milvus_server():
            return _run(args)
    return _run(args)


@contextmanager
def _milvus_server():
    import tempfile

    from tests.index_fixtures import EMBEDDED_MILVUS_TOKEN, EmbeddedMilvusServer

    server = EmbeddedMilvusServer(Path(tempfile.mkdtemp(prefix="loci-bench-milvus-")))
    os.environ["MILVUS_URI"], os.environ["MILVUS_TOKEN"] = server.start(), EMBEDDED_MILVUS_TOKEN
    try:
        yield
    finally:
        server.stop()


def _run(args):
    var = Path(args.var_dir) if args.var_dir else None
    marker = var / "latency-data.json" if var else None
    kept = json.loads(marker.read_text()) if marker and marker.exists() else None
    setup_django(str(var) if var else None)
    logging.disable(logging.INFO)
    from bench.harness import make_scope
    from retrieval.embeddings import embedder

    sizes = sorted(int(s) for s in args.sizes.split(","))
    if kept is not None and (kept["sizes"] != sizes or kept["base_texts"] != args.base_texts):
        raise SystemExit(f"{var} holds the data of {kept}; use another --var-dir for other sizes")
    if kept is not None and len(sizes) > 1:
        raise SystemExit("a kept data dir holds its largest size only: measure one size per --var-dir")
    rng = np.random.default_rng(7)
    texts = corpus_sentences()
    picked = [texts[i] for i in rng.choice(len(texts), size=min(args.base_texts, len(texts)), replace=False)]
    t0 = time.perf_counter()
    vectors = None if kept else np.asarray(embedder().embed_documents(picked), dtype=np.float32)
    embed_seconds = time.perf_counter() - t0
    qs = [questions()[i] for i in rng.choice(len(questions()), size=args.queries, replace=False)]
    results = {"embedded texts": len(picked), "embedding seconds": round(embed_seconds, 1), "sizes": {}}
    answers = {} if args.answers else None
    total = 0
    scope = kb = None
    for size in sizes:
        scope, kb = make_scope("latency", "latency")
        t0 = time.perf_counter()
        if not kept:
            populate(size - total, picked, vectors, scope, kb, rng, token_vectors=bool({LATE, BOTH, LATE_100, LATE_20} & set(args.methods.split(","))))
        total = size
        load_seconds = time.perf_counter() - t0
        from retrieval.backends import vector_index

        getattr(vector_index(), "preload", lambda: None)()  # as a process's warm start: rows read, IVFs built
        measure(scope, qs[:20], args.methods.split(","))  # warm-up: jieba, model, page cache
        results["sizes"][size] = {"load seconds": round(load_seconds, 1),
                                  **measure(scope, qs, args.methods.split(","), answers)}
        print(json.dumps({size: results["sizes"][size]}), flush=True)
    if marker and not kept:
        marker.write_text(json.dumps({"sizes": sizes, "base_texts": args.base_texts}))
    if args.answers:
        Path(args.answers).write_text(json.dumps(answers))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
