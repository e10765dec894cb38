"""The replay of bench.rank_stages (`--replay`): a collected file's candidates reordered offline.

Every variant's one weight is chosen on the dev conversations (even indices) and reported on the held-out
ones (odd indices), and the reverse; the table gives the held-out figures of both folds, pooled, beside the
stage off, on the same candidates. With `by_question` the folds are a single conversation's even and odd
questions. fit_map and fit_platt fit the stage's calibrated map (bench.fit_late_interaction uses them).
"""

import json
from collections import defaultdict
from pathlib import Path

import numpy as np


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
        own = message_ids(items, lambda i: logit(base[i]) + w_li * items[i]["li_turn"])
        return rrf_lists([own, row["flat_colbert"]], [1.0, w_channel])
    if form in ("li_text", "li_turn"):  # logit(relevance) + w · MaxSim: the order of the calibrated map
        return message_ids(items, lambda i: logit(base[i]) + w * items[i][form])
    if form == "li_both":
        return message_ids(items, lambda i: logit(base[i]) + w[0] * items[i]["li_turn"] + w[1] * items[i]["li_text"])
    if form.startswith("ce_"):  # after li_turn (weight w[0]), the cross-encoder reorders the first CE_HEAD
        w_li, w_ce = w
        li = [logit(base[i]) + w_li * items[i]["li_turn"] for i in range(len(items))]
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
    from retrieval.runtimes import cross_encoder

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
        key = [logit(it["score"]) for it in items]
    else:
        key = [logit(it["score"]) + w * it[form] for it in items]
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


def logit(p: float) -> float:
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
                x.append((logit(it["score"]), it[feature], 1.0))
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
            x.append((logit(it["score"]) + w * it[feature], 1.0))
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
