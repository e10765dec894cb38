"""The late-interaction map (SEARCH_LATE_INTERACTION_MAP) fitted on short chats: one LoCoMo session each.

    python -m bench.fit_late_interaction --convs 0,2,4,5 --collect /tmp/li/short.json
    python -m bench.fit_late_interaction --fit /tmp/li/short.json

The map was fitted on the candidates of whole LoCoMo conversations (600 turns), where hybrid's relevance of
a right answer is higher than in a chat of ten lines and P(relevant) is one of thirty candidates; under it
the 0.01 floor left out right answers of short chats. Here each session of a dev conversation is posted
alone (its own user), like a short chat a user asks about a few days later, and searched through the API
with the stage on and no floor (top_k 30: every candidate the stage rescored, with the product's own
hybrid relevance and MaxSim, `scores.hybrid_relevance` / `scores.late_interaction`):

- its own questions whose evidence lies wholly in that session (answerable: an item is relevant when it
  cites an evidence turn);
- OFF_TOPIC questions of the other dev conversations (other people, other lives: nothing in the memory
  answers them, every item is a negative) — what the floor exists to silence.

`--fit` fits P = σ(s·(logit(h) + W·MaxSim) + c), the order hybrid + W·MaxSim kept (W = 5, chosen for
R@10 on LoCoMo's even conversations, bench/RESULTS.md), by logistic regression, in two folds of
conversations (fitted on one, the floor read on the other) and on all of them; and reports, for each map
and the shipped one, on the fold it was not fitted on: the share of answerable questions whose relevant
item stays above the floor, and the share of off-topic questions left with nothing (query.weak).
"""

import argparse
import json
import os
import random
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench.locomo import DEFAULT_PATH, load
from bench.rank_replay import fit_map, fit_platt

OFF_TOPIC = 3  # other conversations' questions asked of each session
ORDER_W = 5.0  # the stage's order: logit(h) + 5·MaxSim (settings: b/a)
FLOOR = 0.01  # MRAG_MIN_RELEVANCE
SHIPPED = (2.6753, 13.3767, -5.365)  # SEARCH_LATE_INTERACTION_MAP before this fit


def collect(path: Path, indices: list[int], out: Path, embedding_cache: str | None, max_sessions: int) -> None:
    os.environ["SEARCH_LATE_INTERACTION"] = "1"  # the projection is written at ingestion, the stage runs
    os.environ["MRAG_MIN_RELEVANCE"] = "0"  # every candidate, with its score, to fit on
    from bench.harness import api_client, call, close_stack, conversation_stack, post_session

    var = conversation_stack(embedding_cache)
    try:
        client = api_client()
        convs = load(path, indices)
        rng = random.Random(24)
        stats, rows = defaultdict(float), []
        for conv in convs:
            others = [q for c in convs if c["index"] != conv["index"] for q in c["questions"]]
            sessions = []
            for session in conv["sessions"]:
                ids = {t["dia_id"] for t in session["turns"]}
                own = [q for q in conv["questions"] if set(q["evidence"]) <= ids]
                if own:
                    sessions.append((session, own))
            for session, own in sessions[:max_sessions]:
                user = f"{conv['user_id']}-s{session['number']}"
                messages = [{"message_id": t["dia_id"], "sender_id": t["speaker"], "sender_name": t["speaker"],
                             "content": t["text"], "timestamp": t["timestamp"].isoformat()} for t in session["turns"]]
                post_session(client, user, user, messages, stats)
                asked = [(q, q["evidence"]) for q in own] + [(q, []) for q in rng.sample(others, OFF_TOPIC)]
                for q, evidence in asked:
                    response = call(client, "post", "/api/v1/memories/search",
                                    {"query": q["question"], "method": "hybrid", "top_k": 30,
                                     "filters": {"user_id": user}})
                    items = []
                    for kind in ("facts", "episodes"):
                        for it in response.get(kind, []):
                            scores = it.get("scores", {})
                            if "late_interaction" not in scores:
                                continue
                            items.append({"score": scores["hybrid_relevance"], "li_turn": scores["late_interaction"],
                                          "kind": kind, "ids": [s["message_id"] for s in it.get("sources", [])
                                                                if s.get("type") == "message"]})
                    rows.append({"conv": conv["index"], "session": session["number"], "turns": len(messages),
                                 "category": q["category"], "question": q["question"], "evidence": evidence,
                                 "items": items})
            print(f"conv {conv['index']}: {len(sessions[:max_sessions])} sessions, {len(rows)} rows so far",
                  file=sys.stderr, flush=True)
            out.write_text(json.dumps({"stats": stats, "rows": rows}))
    finally:
        close_stack(var, False)


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return float(np.log(p / (1 - p)))


def probability(m, h: float, maxsim: float) -> float:
    a, b, c = m
    return float(1 / (1 + np.exp(-(a * _logit(h) + b * maxsim + c))))


def floor_report(rows, m) -> dict:
    """On `rows`: answerable questions whose best relevant item stays ≥ FLOOR, off-topic questions left
    with nothing ≥ FLOOR, and the P of each (quartiles)."""
    kept, weak, right_p, off_p = [], [], [], []
    for r in rows:
        ps = [(probability(m, it["score"], it["li_turn"]), bool(set(r["evidence"]) & set(it["ids"])))
              for it in r["items"]]
        if r["evidence"]:
            best = max((p for p, rel in ps if rel), default=None)
            if best is not None:  # the stage's candidates held a relevant item
                kept.append(best >= FLOOR)
                right_p.append(best)
        else:
            top = max((p for p, _ in ps), default=0.0)
            weak.append(top < FLOOR)
            off_p.append(top)
    q = lambda v: [round(float(x), 4) for x in np.quantile(v, [0.1, 0.25, 0.5, 0.75, 0.9])] if v else []  # noqa: E731
    return {"answerable kept": round(float(np.mean(kept)), 4), "answerable n": len(kept),
            "off-topic weak": round(float(np.mean(weak)), 4), "off-topic n": len(weak),
            "best relevant P p10/25/50/75/90": q(right_p), "best off-topic P p10/25/50/75/90": q(off_p)}


def fit(path: Path) -> dict:
    rows = json.loads(path.read_text())["rows"]
    convs = sorted({r["conv"] for r in rows})
    half = [convs[0::2], convs[1::2]]
    report = {"rows": len(rows), "answerable": sum(bool(r["evidence"]) for r in rows),
              "items": sum(len(r["items"]) for r in rows), "maps": {}}
    maps = {"shipped": (SHIPPED, None)}
    for n, dev in enumerate(half):
        dev_rows = [r for r in rows if r["conv"] in dev]
        maps[f"order fixed, fitted on {dev}"] = (fit_platt(dev_rows, "li_turn", ORDER_W), dev)
        maps[f"free, fitted on {dev}"] = (fit_map(dev_rows, "li_turn"), dev)
    maps["order fixed, all"] = (fit_platt(rows, "li_turn", ORDER_W), None)
    maps["free, all"] = (fit_map(rows, "li_turn"), None)
    for name, (m, dev) in maps.items():
        held = [r for r in rows if dev is None or r["conv"] not in dev]
        report["maps"][name] = {"map": [round(v, 4) for v in m],
                                "read on": "all" if dev is None else sorted(set(convs) - set(dev)),
                                **floor_report(held, m)}
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", default=str(DEFAULT_PATH))
    parser.add_argument("--convs", default="0,2,4,5", help="dev conversations (1 and 3 are held out)")
    parser.add_argument("--collect", help="ingest each session alone, search, write the rows to this JSON file")
    parser.add_argument("--fit", help="fit the map on the rows of this file")
    parser.add_argument("--embedding-cache")
    parser.add_argument("--max-sessions", type=int, default=12, help="sessions per conversation at most")
    args = parser.parse_args(argv)
    if args.collect:
        collect(Path(args.path), [int(i) for i in args.convs.split(",")], Path(args.collect), args.embedding_cache,
                args.max_sessions)
    if args.fit:
        print(json.dumps(fit(Path(args.fit)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
