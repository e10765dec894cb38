"""Fit the calibrated relevance (SEARCH_RELEVANCE_*) and choose the floor (MRAG_MIN_RELEVANCE) on CMRC 2018.

    python -m bench.cmrc --var-dir var-cmrc                 # ingest once, keep the data
    python -m bench.fit_relevance --var-dir var-cmrc        # fit, sweep the floor, print the settings

Every question is searched with each method (facts, episodes and chunks, top_k 10, no floor); each
top-level item, and each fact nested under a keyword/vector episode, is one sample: its method's
own signal (hybrid: the logit of a fact's final or an episode's fused score — one map for both,
since the expander ranks them against each other — and of a chunk's fused score; keyword: raw
BM25; vector: raw cosine) and whether it comes from the gold passage and holds a gold answer in
its first WINDOW characters: relevance is the chance that reading the item's start answers the
question, so a passage that holds the answer at its end does not outrank the sentence that says it.
A one-feature logistic regression per signal (Platt scaling) is fitted on the even questions
and its log loss and calibration reported on the odd ones.

The floor sweep replays each method's merged order (by calibrated relevance) without the items
under the floor and reports, for every floor: answer@100/200 and passage R@10 (what the floor
must not cost), and the share of questions whose best item from *another* passage is under the
floor, i.e. that would answer "weak" if the gold document were deleted (what the floor is for).
"""

import argparse
import json
import logging
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench.cmrc import DEFAULT_PATH, file_name, item_documents, item_text, load
from bench.harness import make_scope, setup_django

FLOORS = (0.0, 0.02, 0.03, 0.035, 0.04, 0.045, 0.05, 0.06, 0.08, 0.1)
WINDOW = 200  # characters of an item a reader takes in at a glance; answer@200 of bench.cmrc
METHODS = ("hybrid", "keyword", "vector")


def signal_of(method: str, kind: str) -> str:
    if method == "hybrid":
        return "chunk" if kind == "chunk" else "mrag"
    return "bm25" if method == "keyword" else "cosine"


def raw(method: str, kind: str, item: dict) -> float:
    s = item["scores"]
    if method == "hybrid":
        value = s["fused"] if kind != "fact" else s["final"]
        return math.log(max(value, 1e-9) / max(1 - value, 1e-9))
    return s["bm25"] if method == "keyword" else s["cosine"]


def samples(passages, methods) -> list[dict]:
    """Per question and method: its items [(kind, signal, x, label, text, docs)], in the method's order."""
    from memory.models import Document
    from retrieval.request import parse_search_request
    from retrieval.search import search

    scope, kb = make_scope("cmrc", "cmrc")
    by_name = {d.filename: d.pk for d in Document.objects.filter(kb=kb, status="ready")}
    out = []
    for p in passages:
        gold = by_name.get(file_name(p, "title")) or by_name.get(file_name(p, "id"))
        for qa in (qa for qa in p["qas"] if qa["question"].strip() and gold):
            answers = [a["text"] for a in qa["answers"] if a["text"]]
            row = {"gold": gold, "answers": answers, "methods": {}}
            for method in methods:
                response = search(scope, parse_search_request({
                    "query": qa["question"], "method": method, "top_k": 10,
                    "memory_types": ["episode", "atomic_fact", "chunk"]}))
                items = []
                for kind, key in (("fact", "facts"), ("episode", "episodes"), ("chunk", "chunks")):
                    for it in response.get(key, []):
                        if it["scores"].get("via_fact"):
                            continue
                        items.append((kind, it))
                for e in response["episodes"]:  # flat methods: fact hits nested under their episode
                    if method != "hybrid":
                        items += [("fact", f) for f in e.get("atomic_facts", [])]
                row["methods"][method] = [{
                    "kind": kind, "signal": signal_of(method, kind), "x": raw(method, kind, it),
                    "text": item_text(it), "docs": item_documents(it),
                    "label": gold in item_documents(it) and any(a in item_text(it)[:WINDOW] for a in answers),
                } for kind, it in items]
            out.append(row)
    return out


def fit_platt(x: np.ndarray, y: np.ndarray, iterations: int = 50) -> tuple[float, float]:
    """Newton's method on the logistic log likelihood of y ~ sigmoid(w·x + b), lightly regularised."""
    w = b = 0.0
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-(w * x + b)))
        g = np.array([((p - y) * x).sum() + 1e-3 * w, (p - y).sum()])
        h = p * (1 - p)
        hess = np.array([[(h * x * x).sum() + 1e-3, (h * x).sum()], [(h * x).sum(), h.sum() + 1e-9]])
        step = np.linalg.solve(hess, g)
        w, b = w - step[0], b - step[1]
        if np.abs(step).max() < 1e-8:
            break
    return float(w), float(b)


def report_calibration(x, y, w, b) -> dict:
    p = 1 / (1 + np.exp(-(w * x + b)))
    loss = float(-(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12)).mean())
    bins = np.minimum((p * 10).astype(int), 9)
    ece = sum(abs(p[bins == k].mean() - y[bins == k].mean()) * (bins == k).sum()
              for k in range(10) if (bins == k).any())
    return {"n": int(len(y)), "positives": int(y.sum()), "log_loss": round(loss, 4),
            "ECE": round(float(ece / len(y)), 4)}


def replay(rows, method: str, maps: dict, floor: float, with_chunks: bool) -> dict:
    answer = {100: 0, 200: 0}
    recall10 = weak_if_deleted = weak_now = first = 0
    for row in rows:
        items = [it for it in row["methods"][method] if with_chunks or it["kind"] != "chunk"]
        for it in items:
            w, b = maps[it["signal"]]
            it["p"] = 1 / (1 + math.exp(-(w * it["x"] + b)))
        kept = sorted((it for it in items if it["p"] >= floor), key=lambda it: it["p"], reverse=True)
        context = "".join(it["text"] for it in kept)
        first += bool(kept) and any(a in kept[0]["text"] for a in row["answers"])
        for n in answer:
            answer[n] += any(a in context[:n] for a in row["answers"])
        docs = list(dict.fromkeys(d for it in kept for d in it["docs"]))
        recall10 += row["gold"] in docs[:10]
        # Only questions whose list holds another passage's item say anything about a deletion.
        others = [it["p"] for it in items if row["gold"] not in it["docs"]]
        weak_if_deleted += bool(others) and max(others) < floor
        weak_now += not kept
    n = max(1, len(rows))
    return {"floor": floor, "first": round(first / n, 3), "ans@100": round(answer[100] / n, 3),
            "ans@200": round(answer[200] / n, 3),
            "R@10": round(recall10 / n, 3), "weak if gold deleted": round(weak_if_deleted / n, 3),
            "weak now": round(weak_now / n, 3)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", nargs="?", default=str(DEFAULT_PATH))
    parser.add_argument("--var-dir", required=True, help="a data directory `bench.cmrc --var-dir` filled")
    parser.add_argument("--limit-passages", type=int, default=None)
    parser.add_argument("--samples", help="cache of the searched samples (JSON): written once, then read")
    parser.add_argument("--methods", default=",".join(METHODS))
    args = parser.parse_args(argv)
    setup_django(args.var_dir)
    logging.disable(logging.WARNING)
    from django.conf import settings

    settings.MRAG_MIN_RELEVANCE = 0.0  # the floor would hide the samples under it
    methods = args.methods.split(",")
    if args.samples and Path(args.samples).exists():
        rows = json.loads(Path(args.samples).read_text())
    else:
        rows = samples(load(Path(args.path), args.limit_passages), methods)
        if args.samples:
            Path(args.samples).write_text(json.dumps(rows, ensure_ascii=False))
    train, test = rows[0::2], rows[1::2]
    maps, report = dict(settings.SEARCH_RELEVANCE), {"questions": len(rows), "maps": {}, "floors": defaultdict(list)}
    by_signal = defaultdict(lambda: ([], [], [], []))
    for half, part in ((0, train), (2, test)):
        for row in part:
            for method in methods:
                for it in row["methods"][method]:
                    xs = by_signal[it["signal"]]
                    xs[half].append(it["x"])
                    xs[half + 1].append(float(it["label"]))
    for signal, (xtr, ytr, xte, yte) in by_signal.items():
        w, b = fit_platt(np.array(xtr), np.array(ytr))
        maps[signal] = (w, b)
        report["maps"][signal] = {"W": round(w, 4), "B": round(b, 4),
                                  "held out": report_calibration(np.array(xte), np.array(yte), w, b)}
    for method in methods:
        for with_chunks in (False, True):
            label = f"{method}{' +chunks' if with_chunks else ''}"
            for floor in FLOORS:
                report["floors"][label].append(replay(rows, method, maps, floor, with_chunks))
    print(json.dumps(report, ensure_ascii=False, indent=1))
    for signal, m in report["maps"].items():
        print(f"SEARCH_RELEVANCE_{signal.upper()}_W={m['W']} SEARCH_RELEVANCE_{signal.upper()}_B={m['B']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
