"""Fit the multilingual stage's map (SEARCH_MULTILINGUAL_RERANK_*) and prove the floor on CMRC 2018.

    python -m bench.cmrc --var-dir var-cmrc --methods hybrid      # ingest once, keep the data
    python -m bench.fit_multilingual --var-dir var-cmrc --samples cmrc-ml.json

Every CMRC question is searched with hybrid and the stage on (facts, episodes and chunks, top_k 10,
no floor); each scored item is a sample (logit of hybrid's relevance, the reranker's score, and
whether it comes from the gold passage and holds a gold answer in its first WINDOW characters, as
bench.fit_relevance labels). P = σ(a·logit(h) + b·s + c) is fitted on the even questions by
logistic regression; everything reported is on the odd ones: calibration, and the merged order
by P against hybrid's own (first item, answer@100/200, passage R@10), for each floor.

Noise: nonsense and off-topic queries in Chinese and English (none is answered by CMRC's 256
Wikipedia passages), split in two: the floor is read on NOISE_DEV and proved on NOISE_HELD: the
share of them answered "nothing answers well" (best P under the floor), beside the share of odd
questions that keep their answer.
"""

import argparse
import json
import logging
import math
import sys
from pathlib import Path

import numpy as np

from bench.cmrc import DEFAULT_PATH, file_name, item_documents, item_text, load
from bench.harness import make_scope, setup_django

WINDOW = 200
FLOORS = (0.005, 0.01, 0.02, 0.03, 0.05)
# Nonsense and off-topic queries: CMRC's passages are Wikipedia articles (people, places, games,
# history); none of these is answered there. Dev part (the floor is read here) and held-out part.
NOISE_DEV = [
    "qwxz blorf zzyzx frobnicate", "阿巴阿巴 咕噜咕噜 嘀嗒嘀嗒", "如何在Juniper路由器上配置BGP路由反射器？",
    "钨的沸点是多少开尔文？", "What is the boiling point of tungsten in kelvin?", "我的快递什么时候到？",
    "How do I reset my router password?", "明天上海会下雨吗？", "骊犇 鬯 饕餮纹 嫑 甭 孬", "昨天晚饭我吃了什么？",
]
NOISE_HELD = [
    "zorp quibble flanx vextrum", "嘟嘟噜 喵喵喵 呜啦啦", "怎样用Python读取Excel文件？", "Which team won the 1998 football world cup final?",
    "我家的猫为什么不吃饭？", "How many grams of sugar are in a can of cola?", "请帮我把这段话翻译成法语", "银行的贷款利率是多少？",
    "犇羴鱻 骉 猋 麤 靐 龘", "我上周五开会时说了什么？",
]


def logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def collect(passages, noise) -> dict:
    from memory.models import Document
    from retrieval.request import parse_search_request
    from retrieval.search import search

    scope, kb = make_scope("cmrc", "cmrc")
    by_name = {}
    for d in Document.objects.filter(kb=kb, status="ready"):
        by_name.setdefault(d.filename, d.pk)

    def items_of(query):
        response = search(scope, parse_search_request({"query": query, "method": "hybrid", "top_k": 10,
                                                       "memory_types": ["episode", "atomic_fact", "chunk"]}))
        out = []
        for key in ("facts", "episodes", "chunks"):
            for it in response.get(key, []):
                if it["scores"].get("via_fact"):
                    continue
                s = it["scores"]
                out.append({"h": s.get("hybrid_relevance", it["score"]), "s": s.get("multilingual"),
                            "text": item_text(it)[:WINDOW], "docs": item_documents(it)})
        return out

    rows = []
    for p in passages:
        gold = by_name.get(file_name(p, "title")) or by_name.get(file_name(p, "id"))
        for qa in (qa for qa in p["qas"] if qa["question"].strip() and gold):
            answers = [a["text"] for a in qa["answers"] if a["text"]]
            items = items_of(qa["question"])
            for it in items:
                it["label"] = gold in it["docs"] and any(a in it["text"] for a in answers)
            rows.append({"gold": gold, "answers": answers, "items": items})
    return {"rows": rows, "noise": {q: items_of(q) for q in noise}}


def fit(x: np.ndarray, y: np.ndarray, iterations: int = 100) -> np.ndarray:
    """Newton's method on the logistic log likelihood of y ~ σ(x·w), x with a column of ones, lightly regularised."""
    w = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-(x @ w)))
        g = x.T @ (p - y) + 1e-3 * w
        h = (x * (p * (1 - p))[:, None]).T @ x + 1e-3 * np.eye(x.shape[1])
        step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def features(items, lowest=None):
    """(logit h, s) per item; an unscored item takes the lowest score of the scored, as the stage does."""
    scored = [it["s"] for it in items if it["s"] is not None]
    low = min(scored) if scored else 0.0
    return [(logit(it["h"]), it["s"] if it["s"] is not None else low) for it in items]


def prob(items, abc):
    if abc is None:
        return [it["h"] for it in items]
    a, b, c = abc
    return [1 / (1 + math.exp(-(a * lh + b * s + c))) for lh, s in features(items)]


def replay(rows, abc, floor):
    first = ans100 = ans200 = r10 = 0
    for row in rows:
        ps = prob(row["items"], abc)
        kept = [it for p, it in sorted(zip(ps, row["items"]), key=lambda t: -t[0]) if p >= floor]
        context = "".join(it["text"] for it in kept)
        first += bool(kept) and any(a in kept[0]["text"] for a in row["answers"])
        ans100 += any(a in context[:100] for a in row["answers"])
        ans200 += any(a in context[:200] for a in row["answers"])
        docs = list(dict.fromkeys(d for it in kept for d in it["docs"]))
        r10 += row["gold"] in docs[:10]
    n = max(1, len(rows))
    return {"first": round(first / n, 3), "ans@100": round(ans100 / n, 3), "ans@200": round(ans200 / n, 3),
            "R@10": round(r10 / n, 3)}


def noise_weak(noise: dict, queries, abc, floor) -> float:
    weak = sum(max(prob(noise[q], abc), default=0.0) < floor for q in queries)
    return round(weak / max(1, len(queries)), 3)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", nargs="?", default=str(DEFAULT_PATH))
    parser.add_argument("--var-dir", help="a data directory `bench.cmrc --var-dir` filled")
    parser.add_argument("--samples", required=True, help="cache of the searched samples (JSON): written once, then read")
    parser.add_argument("--limit-passages", type=int, default=None)
    args = parser.parse_args(argv)
    if Path(args.samples).exists():
        data = json.loads(Path(args.samples).read_text())
    else:
        setup_django(args.var_dir)
        logging.disable(logging.WARNING)
        from django.conf import settings

        settings.MRAG_MIN_RELEVANCE = 0.0  # the floor would hide the samples under it
        settings.SEARCH_MULTILINGUAL_RERANK = True
        data = collect(load(Path(args.path), args.limit_passages), NOISE_DEV + NOISE_HELD)
        Path(args.samples).write_text(json.dumps(data, ensure_ascii=False))
    rows, noise = data["rows"], data["noise"]
    dev, held = rows[0::2], rows[1::2]
    x = np.array([(lh, s, 1.0) for row in dev for lh, s in features(row["items"])])
    y = np.array([float(it["label"]) for row in dev for it in row["items"]])
    a, b, c = (float(v) for v in fit(x, y))
    # The noise queries' best items, and the odd questions' orders, under hybrid alone and under the map.
    report = {"questions": len(rows), "dev samples": len(y), "map": {"A": round(a, 4), "B": round(b, 4), "C": round(c, 4)},
              "floors": []}
    for floor in FLOORS:
        for name, abc in (("hybrid", None), ("+stage", (a, b, c))):
            report["floors"].append({"floor": floor, "order": name, **replay(held, abc, floor),
                                     "noise dev weak": noise_weak(noise, NOISE_DEV, abc, floor),
                                     "noise held-out weak": noise_weak(noise, NOISE_HELD, abc, floor)})
    report["noise best P (held-out)"] = {q: [round(max(prob(noise[q], None), default=0), 4),
                                           round(max(prob(noise[q], (a, b, c)), default=0), 4)] for q in NOISE_HELD}
    print(json.dumps(report, ensure_ascii=False, indent=1))
    print(f"SEARCH_MULTILINGUAL_RERANK_A={a:.4f} SEARCH_MULTILINGUAL_RERANK_B={b:.4f} SEARCH_MULTILINGUAL_RERANK_C={c:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
