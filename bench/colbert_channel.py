"""The ColBERT recall channel's query path at scale: centroid index against exhaustive MaxSim.

    .venv/bin/python -m bench.colbert_channel --messages 20000,100000 --json

A throwaway SQLite database gets one KB of N messages in users of ~600 (a LoCoMo conversation's size).
Their stored vectors are LoCoMo dev turns (all ten conversations, ColBERT-encoded once) with each
copy's int8 components jittered by ±2, so copies are distinct rows as real messages are; the
centroid index is fitted as ingestion fits it (retrieval/backends/token_codes.py). Then LoCoMo questions
ask the channel's query path (colbert_channel.best_messages: centroids, candidates, exact MaxSim read
from the database) with the codebook and exhaustively, filtered to one user and unfiltered (the whole
KB); the query's own encoding is left out (cached: the late-interaction stage pays it anyway).

Also: the CPU to code one message at write time, and a fit's wall time at N.
"""

import argparse
import json
import time

import numpy as np

from bench.harness import cpu_seconds, make_scope, percentile, setup_django
from bench.locomo import DEFAULT_PATH

USER_MESSAGES = 600
QUESTIONS = 60


def turns_and_questions(path) -> tuple[list[str], list[str]]:
    data = json.loads(path.read_text())
    turns, questions = [], []
    for sample in data:
        for key, value in sample["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                turns += [f"{t['speaker']}: {t['text']}" for t in value]
        questions += [qa["question"] for qa in sample["qa"] if qa.get("evidence")]
    return turns, questions


def fill(kb, n: int, matrices: list[np.ndarray], name: str) -> None:
    from datetime import datetime, timezone

    from memory.models import Message
    from retrieval.models import TokenVectors
    from retrieval.runtimes.colbert import quantise

    rng = np.random.default_rng(7)
    stored = [quantise(m) for m in matrices]
    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    for start in range(0, n, 5000):
        count = min(5000, n - start)
        messages = Message.objects.bulk_create([
            Message(tenant_id=kb.tenant_id, kb=kb, user_id=f"u{(start + i) // USER_MESSAGES}", session_id="s",
                    message_id=str(start + i), content="", timestamp=now) for i in range(count)])
        rows = []
        for i, m in enumerate(messages):
            base = stored[(start + i) % len(stored)]
            jitter = rng.integers(-2, 3, size=base.shape) if start + i >= len(stored) else 0
            data = np.clip(base.astype(np.int16) + jitter, -127, 127).astype(np.int8)
            rows.append(TokenVectors(message=m, model=name, text_sha="0" * 16, tokens=len(data), data=data.tobytes()))
        TokenVectors.objects.bulk_create(rows)


def timings(questions, flt, model, *, exhaustive: bool) -> dict:
    """p50/p95 of the query path over these questions (after one untimed call that loads the partition)."""
    from retrieval.search import colbert_channel

    vectors = [model.encode_query(q) for q in questions]
    colbert_channel.best_messages(vectors[0], flt, 10, exhaustive=exhaustive)  # the partition's first load
    ms = []
    for v in vectors:
        started = time.perf_counter()
        colbert_channel.best_messages(v, flt, 10, exhaustive=exhaustive)
        ms.append(1000 * (time.perf_counter() - started))
    return {"p50_ms": round(percentile(ms, 50), 2), "p95_ms": round(percentile(ms, 95), 2)}


def overlap(questions, flt, model, turns: int) -> float:
    """Of the exhaustive top 10, the share the channel's top 10 holds, by turn: a KB of N messages holds
    N / turns jittered copies of each turn, whose order among themselves is the jitter's."""
    from memory.models import Message
    from retrieval.search import colbert_channel

    def turn_ids(pks):
        return {int(m) % turns for m in Message.objects.filter(pk__in=list(pks)).values_list("message_id", flat=True)}

    kept = total = 0
    for q in questions:
        v = model.encode_query(q)
        exact = turn_ids(colbert_channel.best_messages(v, flt, 10, exhaustive=True))
        kept += len(exact & turn_ids(colbert_channel.best_messages(v, flt, 10)))
        total += len(exact)
    return round(kept / total, 4)


def run(sizes: list[int], log=print) -> dict:
    import os

    os.environ["SEARCH_COLBERT_CHANNEL"] = "1"
    os.environ["SEARCH_LATE_INTERACTION"] = "1"
    setup_django()
    from dataclasses import replace

    from retrieval.backends import token_codes, token_vectors
    from retrieval.backends.base import IndexFilter
    from retrieval.search import colbert_partitions

    turns, questions = turns_and_questions(DEFAULT_PATH)
    questions = questions[:: max(1, len(questions) // QUESTIONS)][:QUESTIONS]
    model = token_vectors.model()
    started = time.perf_counter()
    matrices = model.encode_documents(turns)
    log(f"{len(turns)} LoCoMo turns encoded in {time.perf_counter() - started:.0f}s")
    probe = matrices[:200]
    report = {"turns": len(turns), "questions": len(questions), "sizes": {}}
    for n in sizes:
        scope, kb = make_scope("bench", f"kb{n}")
        name = model.name
        fill(kb, n, matrices, name)
        started, cpu = time.perf_counter(), cpu_seconds()
        book = token_codes.fit(kb.tenant_id, kb.pk, name)
        fit_s, fit_cpu = time.perf_counter() - started, cpu_seconds() - cpu
        from retrieval.runtimes.colbert import quantise

        centroids = token_codes.centroids_of(book)
        cpu = cpu_seconds()
        for m in probe:  # what write time adds per message: its tokens' nearest centroids
            token_codes.assign(quantise(m), centroids)
        code_ms = 1000 * (cpu_seconds() - cpu) / len(probe)
        started = time.perf_counter()
        token_codes.kb_tokens(kb.pk, name)  # read on every write batch: whether a refit is due
        count_ms = 1000 * (time.perf_counter() - started)
        flt = IndexFilter(tenant_id=kb.tenant_id, kb_ids=(kb.pk,))
        user = replace(flt, user_id="u1")
        colbert_partitions.forget()
        started = time.perf_counter()
        colbert_partitions.partition(kb.pk, name)
        load_s = time.perf_counter() - started
        entry = {"k": book.k, "fit_seconds": round(fit_s, 1), "fit_cpu_seconds": round(fit_cpu, 1),
                 "code_cpu_ms_per_message": round(code_ms, 3),
                 "kb_token_count_ms": round(count_ms, 1), "partition_load_seconds": round(load_s, 2)}
        for label, f in (("one_user", user), ("whole_kb", flt)):
            # Exhaustive over a whole 100k KB reads ~300 MB per query: fewer questions there.
            few = questions[:10] if label == "whole_kb" else questions
            entry[label] = {"index": timings(questions, f, model, exhaustive=False),
                            "exhaustive": timings(few, f, model, exhaustive=True),
                            "top10_overlap": overlap(few, f, model, len(turns))}
        report["sizes"][n] = entry
        log(json.dumps({n: entry}))
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", default="20000", help="KB sizes, comma-separated")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run([int(n) for n in args.messages.split(",")])
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
