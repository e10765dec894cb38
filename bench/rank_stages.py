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

CANDIDATES = 30  # items hybrid is asked for: the rescoring stage reorders these (--candidates)
CE_TOP = 10  # items the cross-encoder scores, of each order (--ce-top)
SOURCE_TURN_CE = True  # also the cross-encoder over each fact's source turns
TURN_LIST = 100  # the flat ColBERT channel's list per question
LI_MAP = (2.6576, 11.2981, -3.2576)  # the shipped SEARCH_LATE_INTERACTION_MAP (loci/settings.py)


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

        # One thread each, as the projection and the rerank slot run them: CPU per text is what is measured.
        li, ce = colbert.model(threads=1), cross_encoder.model(threads=1)
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
            turn_vectors = dict(zip(ids, (colbert.quantise(m) for m in li.encode_documents([turns[i] for i in ids]))))
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
                        items.append({"score": it["score"], "ids": sources, "kind": kind, "id": it["id"],
                                      "text": it.get("atomic_fact") or it.get("summary") or it.get("text") or ""})
                items.sort(key=lambda it: -it["score"])
                started = time.process_time()
                query = li.encode_query(q["question"])
                turn_score = {i: colbert.maxsim(query, turn_vectors[i]) for i in ids}
                cpu["colbert_turn_scores"] += time.process_time() - started
                for it in items:
                    it["li_turn"] = max((turn_score[i] for i in it["ids"] if i in turn_score), default=None)
                started = time.process_time()
                new = [it["text"] for it in items if it["text"] not in text_vectors]
                text_vectors.update(zip(new, (colbert.quantise(m) for m in li.encode_documents(new))) if new else [])
                for it in items:
                    it["li_text"] = colbert.maxsim(query, text_vectors[it["text"]])
                    if it["li_turn"] is None:
                        it["li_turn"] = it["li_text"]
                cpu["colbert_text"] += time.process_time() - started
                flat = sorted(((s, i) for i, s in turn_score.items()), reverse=True)[:TURN_LIST]
                # The cross-encoder over the first CE_TOP of hybrid's order and of the shipped late-
                # interaction order (the stage it would follow), on the item's text and on each source
                # turn of a fact (an episode cites a whole segment: too many pairs).
                a, b, c = LI_MAP
                by_li = sorted(range(len(items)), key=lambda i: -(a * _logit(items[i]["score"]) + b * items[i]["li_text"]))
                head = sorted(set(range(min(CE_TOP, len(items)))) | set(by_li[:CE_TOP]))
                started = time.process_time()
                for i, s in zip(head, ce.score(q["question"], [items[i]["text"] for i in head]) if head else []):
                    items[i]["ce_text"] = s
                cpu["ce_text"] += time.process_time() - started
                cpu["ce_text_pairs"] += len(head)
                if SOURCE_TURN_CE:
                    started = time.process_time()
                    wanted = list(dict.fromkeys(t for i in head if items[i]["kind"] == "facts"
                                                for t in items[i]["ids"] if t in turns))
                    turn_ce = dict(zip(wanted, ce.score(q["question"], [turns[t] for t in wanted]))) if wanted else {}
                    for i in head:
                        scores = [turn_ce[t] for t in items[i]["ids"] if t in turn_ce]
                        items[i]["ce_turn"] = max(scores) if scores else items[i]["ce_text"]
                    cpu["ce_turn"] += time.process_time() - started
                    cpu["ce_turn_pairs"] += len(wanted)
                cpu["questions"] += 1
                rows.append({"conv": conv["index"], "category": q["category"], "question": q["question"],
                             "evidence": q["evidence"], "items": items, "flat_colbert": [i for _, i in flat],
                             "flat_colbert_scores": [round(s, 4) for s, _ in flat]})
            cpu["messages"] = stats["messages"]
            print(f"conv {conv['index']}: {len(conv['questions'])} questions; cpu so far "
                  f"{ {k: round(v, 1) for k, v in cpu.items()} }", file=sys.stderr, flush=True)
            out.write_text(json.dumps({"cpu": cpu, "stats": stats, "rows": rows}))
    finally:
        print(f"var dir kept for --reuse: {var}", file=sys.stderr, flush=True)
        close_stack(var, True)


def ingest_cost(path: Path, indices: list[int], projection_on: bool) -> dict:
    """Ingestion CPU of these conversations on a fresh stack (cold embedding cache), the projection on or
    off; with it on, also what encoding every English fact and episode (the earlier form) would add."""
    import os

    os.environ["SEARCH_LATE_INTERACTION"] = "1" if projection_on else "0"
    from bench.harness import api_client, close_stack, conversation_stack
    from bench.locomo import ingest, load

    var = conversation_stack(None)
    try:
        from memory.models import Memory

        from retrieval import token_vectors
        from retrieval.relevance import script

        cpu = defaultdict(float)
        original = token_vectors.write

        def timed_write(rows):
            started = time.process_time()
            try:
                return original(rows)
            finally:
                cpu["token_vectors"] += time.process_time() - started

        token_vectors.write = timed_write
        client = api_client()
        stats = defaultdict(float)
        for conv in load(path, indices):
            started = time.process_time()
            ingest(client, conv, stats)
            cpu["ingest_total"] += time.process_time() - started
        report = {"projection": projection_on, "messages": stats["messages"], "load": os.getloadavg(),
                  **{k: round(v, 1) for k, v in cpu.items()}}
        if projection_on:
            texts = [t for t in Memory.objects.filter(kind__in=("atomic_fact", "episode"), status="active")
                     .values_list("text", flat=True) if script(t) == "latin"]
            started = time.process_time()
            token_vectors.model().encode_documents(texts)
            report["earlier form: encoding every fact and episode"] = round(time.process_time() - started, 1)
            report["facts and episodes"] = len(texts)
        return report
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


def ranked_by(row: dict, variant: str, w) -> list[str]:
    """The message list of one question under `variant` with parameters `w` (a number or a tuple).

    A variant is "<form>@<pool>": the first `pool` of hybrid's items (by its relevance) are reordered."""
    form, _, pool = variant.partition("@")
    items = sorted(row["items"], key=lambda it: -it["score"])[: int(pool or 30)]
    base = [it["score"] for it in items]
    if form == "off":
        return message_ids(items, lambda i: base[i])
    if form == "li_channel":  # late interaction of the source turns, fused with the flat ColBERT list (RRF)
        w_li, w_channel = w
        own = message_ids(items, lambda i: _logit(base[i]) + w_li * items[i]["li_turn"])
        return rrf_lists([own, row["flat_colbert"]], [1.0, w_channel])
    if form in ("li_text", "li_turn"):  # logit(relevance) + w · MaxSim: the order of the calibrated map
        return message_ids(items, lambda i: _logit(base[i]) + w * items[i][form])
    if form == "li_both":
        return message_ids(items, lambda i: _logit(base[i]) + w[0] * items[i]["li_turn"] + w[1] * items[i]["li_text"])
    if form.startswith("ce_"):  # after li_turn (weight w[0]), the cross-encoder reorders the first CE_HEAD
        w_li, w_ce = w
        li = [_logit(base[i]) + w_li * items[i]["li_turn"] for i in range(len(items))]
        head = set(sorted(range(len(items)), key=lambda i: -li[i])[:CE_HEAD])
        for i in head:  # the collect scored the first of two other orders: the rest of this head now
            fill_ce(row, items[i])
        return message_ids(items, lambda i: (1e6 + li[i] + w_ce * items[i][form]) if i in head else li[i])
    raise ValueError(variant)


CE_HEAD = 10  # items the cross-encoder reorders after late interaction
_turn_texts: dict[str, str] = {}


def fill_ce(row: dict, item: dict) -> None:
    """The cross-encoder's logits of an item the collect did not score (its text; a fact's source turns)."""
    if "ce_text" in item and "ce_turn" in item:
        return
    from retrieval import cross_encoder

    from bench.locomo import DEFAULT_PATH, load

    if not _turn_texts:
        import json as _json

        for conv in load(DEFAULT_PATH, list(range(len(_json.loads(DEFAULT_PATH.read_text()))))):
            for session in conv["sessions"]:
                for t in session["turns"]:
                    _turn_texts[f"{conv['index']}|{t['dia_id']}"] = f"{t['speaker']}: {t['text']}"
    ce = cross_encoder.model(threads=1)
    if "ce_text" not in item:
        item["ce_text"] = ce.score(row["question"], [item["text"]])[0]
    if "ce_turn" not in item:
        conv = row.get("source_conv", row["conv"])
        turns = [_turn_texts[f"{conv}|{m}"] for m in item["ids"] if f"{conv}|{m}" in _turn_texts]
        item["ce_turn"] = max(ce.score(row["question"], turns)) if turns and item.get("kind") == "facts" \
            else item["ce_text"]
LI_W = [1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0]
WEIGHTS = {
    "off@30": [0.0], "off@50": [0.0], "off@100": [0.0],
    "li_turn@10": LI_W, "li_turn@20": LI_W, "li_text@30": LI_W, "li_turn@30": LI_W, "li_turn@50": LI_W, "li_turn@100": LI_W, "li_text@100": LI_W,
    "li_both@30": [(a, b) for a in (3.0, 5.0, 10.0) for b in (0.0, 2.0, 5.0, 10.0)],
    "li_channel@30": [(a, c) for a in (3.0, 5.0, 10.0) for c in (0.05, 0.1, 0.25, 0.5)],
    "ce_text@30": [(a, c) for a in (3.0, 5.0, 10.0) for c in (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)],
    "ce_turn@30": [(a, c) for a in (3.0, 5.0, 10.0) for c in (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)],
}


def item_order(row: dict, variant: str, w, covered_weight: float, facts_only: bool = True) -> list[int]:
    """Item indices (into the pool) in the order of `variant`, then items whose source messages the items
    above them already cite scored × `covered_weight` (1: off), as retrieval/search/coverage.py does."""
    form, _, pool = variant.partition("@")
    items = sorted(row["items"], key=lambda it: -it["score"])[: int(pool or 30)]
    if form == "off":
        key = [_logit(it["score"]) for it in items]
    else:
        key = [_logit(it["score"]) + w * it[form] for it in items]
    # the calibrated relevance the stage would show: σ(key + c) is monotone in key, so a product on the
    # probability is taken on σ(key) (the constant does not move the order much at these weights)
    prob = [1 / (1 + np.exp(-k)) for k in key]
    order = sorted(range(len(items)), key=lambda i: -prob[i])
    seen: set[str] = set()
    final = {}
    for i in order:
        ids = set(items[i]["ids"])
        counts = not facts_only or items[i].get("kind", "facts") == "facts"
        covered = bool(ids) and ids <= seen and counts
        final[i] = prob[i] * (covered_weight if covered else 1.0)
        if counts:
            seen |= ids
    return sorted(order, key=lambda i: -final[i]), items


def item_recall(row: dict, variant: str, w, covered_weight: float, k: int = 10, facts_only: bool = True):
    """(recall of the evidence by the messages of the first k items, distinct messages in them)."""
    order, items = item_order(row, variant, w, covered_weight, facts_only)
    messages = {m for i in order[:k] for m in items[i]["ids"]}
    return len(messages & set(row["evidence"])) / len(row["evidence"]), len(messages)


COVERED_WEIGHTS = [1.0, 0.8, 0.5, 0.3, 0.0]


def coverage_report(rows, folds, variant: str, w_by_fold: list) -> dict:
    """Coverage demotion's weight chosen on dev (item-level R@10), held-out figures pooled."""
    out = {}
    for facts_only in (True, False):
        held, chosen = [], []
        for (dev, test), w in zip(folds, w_by_fold):
            dev_rows = [r for r in rows if r["conv"] in dev]
            best = max(COVERED_WEIGHTS, key=lambda cw: np.mean([item_recall(r, variant, w, cw, 10, facts_only)[0]
                                                                for r in dev_rows]))
            chosen.append(best)
            held += [(r, w, best) for r in rows if r["conv"] in test]
        entry = {"weights(dev→held-out)": chosen}
        for label, pick in (("off", lambda cw: 1.0), ("chosen", lambda cw: cw)):
            for k in (5, 10, 20):
                res = [item_recall(r, variant, w, pick(cw), k, facts_only) for r, w, cw in held]
                entry[f"{label} item R@{k}"] = round(float(np.mean([x[0] for x in res])), 4)
                entry[f"{label} distinct messages in {k} items"] = round(float(np.mean([x[1] for x in res])), 2)
        out["facts only" if facts_only else "facts and episodes"] = entry
    return out


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return float(np.log(p / (1 - p)))


def fit_map(rows, feature: str = "li_text", pool: int = 30) -> tuple[float, float, float]:
    """(a, b, c) of P(item cites evidence) = σ(a·logit(relevance) + b·feature + c), by Newton's method
    (IRLS) on every candidate item of `rows`: the calibrated map SEARCH_LATE_INTERACTION_MAP."""
    x, y = [], []
    for r in rows:
        evidence = set(r["evidence"])
        for it in sorted(r["items"], key=lambda it: -it["score"])[:pool]:
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


def fit_platt(rows, feature: str, w: float, pool: int = 30) -> tuple[float, float, float]:
    """The map with its order fixed at logit(relevance) + w·feature (w chosen for R@10): P = σ(s·(that) + c)
    fitted by logistic regression, returned as (a, b, c) = (s, s·w, c) of SEARCH_LATE_INTERACTION_MAP."""
    x, y = [], []
    for r in rows:
        evidence = set(r["evidence"])
        for it in sorted(r["items"], key=lambda it: -it["score"])[:pool]:
            x.append((_logit(it["score"]) + w * it[feature], 1.0))
            y.append(1.0 if evidence & set(it["ids"]) else 0.0)
    X, Y = np.asarray(x), np.asarray(y)
    v = np.zeros(2)
    for _ in range(50):
        p = 1 / (1 + np.exp(-X @ v))
        step = np.linalg.solve((X * (p * (1 - p))[:, None]).T @ X + 1e-6 * np.eye(2), X.T @ (Y - p))
        v += step
        if np.abs(step).max() < 1e-9:
            break
    return float(v[0]), float(v[0] * w), float(v[1])


def mean_recall(rows, variant, w, k=10) -> float:
    return float(np.mean([recall(ranked_by(r, variant, w), r["evidence"], k) for r in rows])) if rows else 0.0


def replay(path: Path, by_question: bool = False) -> dict:
    """`by_question`: the folds are the questions of even and odd position (one conversation collected)."""
    data = json.loads(path.read_text())
    rows = data["rows"]
    if by_question:
        rows = [{**row, "conv": n % 2, "source_conv": row["conv"]} for n, row in enumerate(rows)]
    convs = sorted({r["conv"] for r in rows})
    folds = [([c for c in convs if c % 2 == 0], [c for c in convs if c % 2 == 1]),
             ([c for c in convs if c % 2 == 1], [c for c in convs if c % 2 == 0])]
    report = {"questions": len(rows), "cpu": data["cpu"], "variants": {}}
    cats = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
    for variant in WEIGHTS:
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
                                                    for w in WEIGHTS[variant]}
        report["variants"][variant] = entry
    chosen_w = report["variants"]["li_turn@30"]["weights(dev→held-out)"]
    report["coverage, stage off"] = coverage_report(rows, folds, "off@30", [0.0, 0.0])
    report["coverage, after li_turn@30"] = coverage_report(rows, folds, "li_turn@30", chosen_w)
    report["map"] = {}
    for feature in ("li_text", "li_turn"):
        maps = {"all": fit_map(rows, feature)}
        for pool in (30, 100):
            maps[f"all, pool {pool}"] = fit_map(rows, feature, pool)
        for n, (dev, _) in enumerate(folds):
            maps[f"fold {n} dev {dev}"] = fit_map([r for r in rows if r["conv"] in dev], feature)
        report["map"][feature] = {k: [round(v, 4) for v in m] for k, m in maps.items()}
    report["map, order fixed"] = {f"li_turn w={w}": [round(v, 4) for v in fit_platt(rows, "li_turn", w)]
                                  for w in (2.0, 3.0, 5.0, 7.0)}
    report["flat-colbert R@10"] = round(float(np.mean([recall(r["flat_colbert"], r["evidence"]) for r in rows])), 4)
    return report


def main(argv=None) -> int:
    global CE_TOP, CANDIDATES
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
    parser.add_argument("--ingest-cost", choices=("on", "off"), help="ingestion CPU, projection on or off")
    parser.add_argument("--candidates", type=int, default=CANDIDATES, help="items hybrid is asked for (max 100)")
    parser.add_argument("--ce-top", type=int, default=CE_TOP, help="items of each order the cross-encoder scores")
    args = parser.parse_args(argv)
    if args.ingest_cost:
        print(json.dumps(ingest_cost(Path(args.path), [int(i) for i in args.convs.split(",")],
                                     args.ingest_cost == "on")))
    if args.collect:
        CE_TOP = 0 if args.no_ce else args.ce_top
        CANDIDATES = args.candidates
        collect(Path(args.path), [int(i) for i in args.convs.split(",")], Path(args.collect), args.embedding_cache,
                args.reuse, args.cpu_budget)
    if args.replay:
        print(json.dumps(replay(Path(args.replay), args.by_question), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
