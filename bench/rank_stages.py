"""Late interaction (ColBERT MaxSim) and a cross-encoder on top of hybrid: LoCoMo R@10, stage off vs on.

    .venv/bin/python -m bench.rank_stages --convs 0,1,2,3,4,5 --collect /tmp/rank/locomo.json
    .venv/bin/python -m bench.rank_stages --replay /tmp/rank/locomo.json

`--collect` ingests the conversations as bench.locomo does (same API, same stack) and, for every
question, asks hybrid for CANDIDATES items and stores, beside each item's calibrated relevance and
cited dia_ids, what the new stages would add: the ColBERT MaxSim of the item's own text and of its
source turns ("speaker: text", the best of them), the cross-encoder logit of the item's text and of
its best source turn for the first CE_TOP items, and ColBERT's flat ranking of every turn of the
conversation (the recall-channel candidate). CPU seconds per stage are recorded.

`--replay` reorders offline. Every variant's one weight is chosen on the dev conversations (even
indices) and reported on the held-out ones (odd indices), and the reverse; the table gives the
held-out figures of both folds, pooled, beside the stage off, on the same candidates. With
`--by-question` the folds are a single conversation's even and odd questions.
"""

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

CANDIDATES = 30  # items hybrid is asked for: the rescoring stage reorders these
CE_TOP = 10  # items the cross-encoder scores
SOURCE_TURN_CE = False  # also the cross-encoder over each item's source turn (doubles its cost)
TURN_LIST = 50  # the flat ColBERT channel's list per question


def collect(path: Path, indices: list[int], out: Path, embedding_cache: str | None, reuse: str | None = None,
            cpu_budget: float = 0.0) -> None:
    """Ingest with the late-interaction projection on (its CPU share measured: token_vectors.write),
    search with the stage off (hybrid's own order and relevance), score the candidates offline.
    The rows are written after every conversation, so a run stopped early keeps what it measured."""
    import os

    os.environ["SEARCH_LATE_INTERACTION"] = "1"  # the projection is written at ingestion
    from bench.harness import api_client, call, close_stack, conversation_stack, setup_django
    from bench.locomo import ingest, load

    if reuse:  # a var dir whose conversations are already ingested: only search and score
        os.environ.setdefault("LLM_DISABLED", "1")
        os.environ.setdefault("SEARCH_ENGINE_TIMEOUT_SECONDS", "600")
        var = setup_django(reuse)
    else:
        var = conversation_stack(embedding_cache)
    try:
        from django.test import override_settings

        from memory.models import Memory

        from retrieval import colbert, cross_encoder, token_vectors

        li, ce = colbert.model(), cross_encoder.model()
        cpu = defaultdict(float)
        original = token_vectors.write

        def timed_write(rows):
            started = time.process_time()
            try:
                return original(rows)
            finally:
                cpu["ingest_token_vectors"] += time.process_time() - started

        token_vectors.write = timed_write
        client = api_client()
        stats = defaultdict(float)
        rows = []
        for conv in load(path, indices):
            started = time.process_time()
            if not (reuse and Memory.objects.filter(user_id=conv["user_id"]).exists()):
                ingest(client, conv, stats)
            cpu["ingest_total"] += time.process_time() - started
            turns = {t["dia_id"]: f"{t['speaker']}: {t['text']}" for s in conv["sessions"] for t in s["turns"]}
            ids = list(turns)
            started = time.process_time()
            turn_vectors = dict(zip(ids, li.encode_documents([turns[i] for i in ids])))
            cpu["colbert_turns"] += time.process_time() - started
            cpu["turns"] += len(ids)
            text_vectors: dict[str, np.ndarray] = {}
            for q in conv["questions"]:
                if cpu_budget and time.process_time() > cpu_budget:
                    break
                started = time.process_time()
                with override_settings(SEARCH_LATE_INTERACTION=False):
                    response = call(client, "post", "/api/v1/memories/search",
                                    {"query": q["question"], "method": "hybrid", "top_k": CANDIDATES,
                                     "filters": {"user_id": conv["user_id"]}})
                cpu["search"] += time.process_time() - started
                items = []
                for kind in ("facts", "episodes"):
                    for it in response.get(kind, []):
                        sources = [s["message_id"] for s in it.get("sources", []) if s.get("type") == "message"]
                        items.append({"score": it["score"], "ids": sources,
                                      "text": it.get("atomic_fact") or it.get("summary") or it.get("text") or ""})
                items.sort(key=lambda it: -it["score"])
                started = time.process_time()
                query = li.encode_query(q["question"])
                new = [it["text"] for it in items if it["text"] not in text_vectors]
                text_vectors.update(zip(new, li.encode_documents(new)) if new else [])
                for it in items:
                    it["li_text"] = colbert.maxsim(query, colbert.quantise(text_vectors[it["text"]]))
                    it["li_turn"] = max((colbert.maxsim(query, colbert.quantise(turn_vectors[i]))
                                         for i in it["ids"] if i in turn_vectors), default=it["li_text"])
                cpu["colbert_rescore"] += time.process_time() - started
                flat = sorted(((colbert.maxsim(query, turn_vectors[i]), i) for i in ids), reverse=True)[:TURN_LIST]
                cpu["colbert_flat"] += time.process_time() - started
                started = time.process_time()
                head = items[:CE_TOP]
                for it, s in zip(head, ce.score(q["question"], [it["text"] for it in head])):
                    it["ce_text"] = s
                cpu["ce_text"] += time.process_time() - started
                if SOURCE_TURN_CE:
                    started = time.process_time()
                    source_turns = [next((turns[i] for i in it["ids"] if i in turns), it["text"]) for it in head]
                    for it, s in zip(head, ce.score(q["question"], source_turns)):
                        it["ce_turn"] = s
                    cpu["ce_turn"] += time.process_time() - started
                cpu["questions"] += 1
                rows.append({"conv": conv["index"], "category": q["category"], "question": q["question"],
                             "evidence": q["evidence"], "items": items, "flat_colbert": [i for _, i in flat],
                             "flat_colbert_scores": [round(s, 4) for s, _ in flat]})
            cpu["messages"] = stats["messages"]
            print(f"conv {conv['index']}: {len(conv['questions'])} questions; cpu so far "
                  f"{ {k: round(v, 1) for k, v in cpu.items()} }", file=sys.stderr, flush=True)
            out.write_text(json.dumps({"cpu": cpu, "stats": stats, "rows": rows}))
    finally:
        close_stack(var, False)


# --- replay

def message_ids(items: list[dict], key) -> list[str]:
    ordered = sorted(range(len(items)), key=lambda i: (-key(i), i))
    return list(dict.fromkeys(m for i in ordered for m in items[i]["ids"]))


def recall(ranked: list[str], evidence: list[str], k: int = 10) -> float:
    return len(set(ranked[:k]) & set(evidence)) / len(evidence)


def rrf_lists(lists: list[list[str]], weights: list[float], k: int = 60) -> list[str]:
    score: dict[str, float] = defaultdict(float)
    for ranked, w in zip(lists, weights):
        for r, i in enumerate(ranked):
            score[i] += w / (k + r + 1)
    return sorted(score, key=lambda i: -score[i])


def ranked_by(row: dict, variant: str, w: float) -> list[str]:
    items = row["items"]
    base = [it["score"] for it in items]
    if variant == "off":
        return message_ids(items, lambda i: base[i])
    if variant == "li_channel":  # hybrid's message list fused with the flat ColBERT list by weighted RRF
        return rrf_lists([message_ids(items, lambda i: base[i]), row["flat_colbert"]], [1.0, w])
    if variant.endswith("_logit"):  # logit(score) + w · MaxSim: the order of the calibrated map
        feature = variant[: -len("_logit")]
        return message_ids(items, lambda i: _logit(base[i]) + w * items[i][feature])
    if variant.startswith("li_"):  # score + w · MaxSim, over all candidates
        return message_ids(items, lambda i: base[i] + w * items[i][variant])
    if variant.startswith("ce_"):  # the first CE_TOP reordered by score + w · σ(logit); the rest after
        head = [i for i in range(len(items)) if variant in items[i]]
        sig = {i: 1 / (1 + np.exp(-items[i][variant])) for i in head}
        return message_ids(items, lambda i: (1.0 + base[i] + w * sig[i]) if i in sig else base[i])
    raise ValueError(variant)


WEIGHTS = {
    "li_text": [0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0],
    "li_turn": [0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0],
    "li_text_logit": [1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 50.0],
    "li_turn_logit": [1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 50.0],
    "ce_text": [0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 5.0],
    "ce_turn": [0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 5.0],
    "li_channel": [0.1, 0.25, 0.5, 0.75, 1.0, 1.5],
}


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return float(np.log(p / (1 - p)))


def fit_map(rows, feature: str = "li_text") -> tuple[float, float, float]:
    """(a, b, c) of P(item cites evidence) = σ(a·logit(relevance) + b·feature + c), by Newton's method
    (IRLS) on every candidate item of `rows`: the calibrated map SEARCH_LATE_INTERACTION_MAP."""
    x, y = [], []
    for r in rows:
        evidence = set(r["evidence"])
        for it in r["items"]:
            if feature in it:
                x.append((_logit(it["score"]), it[feature], 1.0))
                y.append(1.0 if evidence & set(it["ids"]) else 0.0)
    X, Y = np.asarray(x), np.asarray(y)
    w = np.zeros(3)
    for _ in range(50):
        p = 1 / (1 + np.exp(-X @ w))
        grad = X.T @ (Y - p) - 1e-3 * w
        hess = (X * (p * (1 - p))[:, None]).T @ X + 1e-3 * np.eye(3)
        step = np.linalg.solve(hess, grad)
        w += step
        if np.abs(step).max() < 1e-8:
            break
    return float(w[0]), float(w[1]), float(w[2])


def mean_recall(rows, variant, w, k=10) -> float:
    return float(np.mean([recall(ranked_by(r, variant, w), r["evidence"], k) for r in rows])) if rows else 0.0


def replay(path: Path, by_question: bool = False) -> dict:
    """`by_question`: the folds are the questions of even and odd position (one conversation collected)."""
    data = json.loads(path.read_text())
    rows = data["rows"]
    if by_question:
        rows = [{**row, "conv": n % 2} for n, row in enumerate(rows)]
    convs = sorted({r["conv"] for r in rows})
    folds = [([c for c in convs if c % 2 == 0], [c for c in convs if c % 2 == 1]),
             ([c for c in convs if c % 2 == 1], [c for c in convs if c % 2 == 0])]
    report = {"questions": len(rows), "cpu": data["cpu"], "variants": {}}
    cats = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
    for variant in ["off", *WEIGHTS]:
        held_rows, chosen = [], []
        for dev, test in folds:
            dev_rows = [r for r in rows if r["conv"] in dev]
            w = max(WEIGHTS.get(variant, [0.0]), key=lambda w: mean_recall(dev_rows, variant, w))
            chosen.append(w)
            held_rows += [(r, w) for r in rows if r["conv"] in test]
        entry = {"weights(dev→held-out)": chosen}
        for k in (5, 10, 20):
            entry[f"R@{k}"] = round(float(np.mean([recall(ranked_by(r, variant, w), r["evidence"], k)
                                                   for r, w in held_rows])), 4)
        entry["by_category R@10"] = {name: round(float(np.mean([recall(ranked_by(r, variant, w), r["evidence"])
                                                                 for r, w in held_rows if r["category"] == c])), 4)
                                     for c, name in cats.items()}
        entry["all weights, all questions R@10"] = {str(w): round(mean_recall(rows, variant, w), 4)
                                                    for w in WEIGHTS.get(variant, [0.0])}
        report["variants"][variant] = entry
    report["map"] = {}
    for feature in ("li_text", "li_turn"):
        maps = {"all": fit_map(rows, feature)}
        for n, (dev, _) in enumerate(folds):
            maps[f"fold {n} dev {dev}"] = fit_map([r for r in rows if r["conv"] in dev], feature)
        report["map"][feature] = {k: [round(v, 4) for v in m] for k, m in maps.items()}
    report["flat-colbert R@10"] = round(float(np.mean([recall(r["flat_colbert"], r["evidence"]) for r in rows])), 4)
    return report


def main(argv=None) -> int:
    from bench.locomo import DEFAULT_PATH

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", default=str(DEFAULT_PATH))
    parser.add_argument("--convs", default="0,1,2,3,4,5")
    parser.add_argument("--collect", help="ingest, search and score; write the rows to this JSON file")
    parser.add_argument("--replay", help="reorder the rows of this file, weights chosen on dev, held-out figures")
    parser.add_argument("--embedding-cache")
    parser.add_argument("--by-question", action="store_true", help="replay folds: even/odd questions, not conversations")
    parser.add_argument("--reuse", help="a var dir whose conversations are ingested: only search and score")
    parser.add_argument("--cpu-budget", type=float, default=0.0, help="stop scoring after this many CPU seconds")
    parser.add_argument("--no-ce", action="store_true", help="skip the cross-encoder")
    args = parser.parse_args(argv)
    if args.collect:
        global CE_TOP
        if args.no_ce:
            CE_TOP = 0
        collect(Path(args.path), [int(i) for i in args.convs.split(",")], Path(args.collect), args.embedding_cache,
                args.reuse, args.cpu_budget)
    if args.replay:
        print(json.dumps(replay(Path(args.replay), args.by_question), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
