"""Late interaction (ColBERT MaxSim) and a cross-encoder on top of hybrid: LoCoMo R@10, stage off vs on.

    .venv/bin/python -m bench.rank_stages --convs 0,1,2,3,4,5 --collect /tmp/rank/locomo.json
    .venv/bin/python -m bench.rank_stages --replay /tmp/rank/locomo.json

`--collect` ingests the conversations as bench.locomo does (same API, same stack) and, for every
question, asks hybrid for CANDIDATES items and stores, beside each item's calibrated relevance and
cited dia_ids, what the new stages would add: the ColBERT MaxSim of the item's own text and of its
source turns ("speaker: text", the best of them), the cross-encoder logit of the item's text and of
its best source turn for the first CE_TOP items, and ColBERT's flat ranking of every turn of the
conversation (the recall-channel candidate). CPU seconds per stage are recorded.

`--replay` reorders offline (bench/rank_replay.py). Every variant's one weight is chosen on the dev conversations (even
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

from bench.rank_replay import logit, replay

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

        from retrieval.backends import token_vectors
        from retrieval.runtimes import colbert, cross_encoder

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
                by_li = sorted(range(len(items)), key=lambda i: -(a * logit(items[i]["score"]) + b * items[i]["li_text"]))
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

        from retrieval.backends import token_vectors
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
