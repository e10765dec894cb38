"""LoCoMo evidence recall of conversation memory, ingested and searched through the REST API.

    .venv/bin/python -m bench.locomo ../shared/data/locomo/locomo10_dev.json --convs 0
    .venv/bin/python -m bench.locomo PATH --convs 0,1,2,3,4,5 --json > locomo.json
    .venv/bin/python -m bench.locomo PATH --embedding-cache /tmp/e5.sqlite --keep --dump misses.json

A throwaway embedded Loci (temporary var dir, SQLite, Milvus Lite, SQLite FTS) gets a tenant, a
KB and an API key; every conversation is posted through `POST /api/v1/memories` (DRF test client,
so the real views, authentication and actions run) and flushed after each LoCoMo session:

- user_id = the conversation's sample_id; one session_id per LoCoMo session (that is how a chat
  app would post them, and the flush at each session's end is then a natural one);
- message_id = dia_id, sender = speaker, timestamp = the session date plus 30 s per turn (order);
  a shared photo becomes "[shares a photo of …]" after the text.

Every question of categories 1-4 is then searched (`POST /api/v1/memories/search`, top_k=20,
filtered to its conversation's user_id) with each method. Results map back to dia_ids: a fact to
its source messages, an episode to all its MemCell's messages in order; ids are collected in rank
order without repeats and cut at k, so k counts dia_ids, not items (a 12-turn episode uses 12;
`bench.harness.ranked_message_ids`). Evidence recall@k = |first k dia_ids ∩ evidence| / |evidence|,
averaged over questions.

Flat baselines over the raw turns ("speaker: text [shares …]") run in the same process on the
same embedder: BM25 (retrieval.text.index_terms, k1=1.2, b=0.75), dense e5 cosine, and their RRF.
"""

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from bench.harness import (api_client, cached_query_embedder, close_stack, conversation_stack, flat_rankings,
                           post_session, search_message_ids, setup_django)

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10_dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}  # 5 (adversarial) has no evidence
LATE = "hybrid+late-interaction"  # hybrid with the late-interaction stage on (its projection written at ingestion)
# The default run includes what users get: hybrid with the late-interaction stage, on by default since
# session 11 (SEARCH_LATE_INTERACTION); "hybrid" here is the same search with that stage off.
CHANNEL = "hybrid+colbert-channel"  # LATE and the ColBERT recall channel (SEARCH_COLBERT_CHANNEL, issue 36)
GAR = "hybrid+colbert-gar"  # CHANNEL with the adjacent turns of its best messages (SEARCH_COLBERT_NEIGHBOURS)
METHODS = ("keyword", "vector", "hybrid", LATE)
CHOICES = METHODS + ("paths", CHANNEL, GAR)  # paths: evidence paths across sessions (issue 28), asked for by name
KS = (5, 10, 20)
TURN_SECONDS = 30  # spacing of turns inside a session: keeps their order, never a 4-hour gap
_DIA_ID = re.compile(r"^D\d+:\d+$")


def clean_evidence(evidence: list) -> list[str]:
    """Split malformed entries ("D8:6; D9:17") and drop what is not a dia_id ("D", "D:11:26")."""
    out = []
    for entry in evidence:
        out += [p for p in re.split(r"[;\s]+", str(entry)) if _DIA_ID.match(p)]
    return list(dict.fromkeys(out))


def session_date(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def load(path: Path, indices: list[int]) -> list[dict]:
    data = json.loads(path.read_text())
    out = []
    for i in indices:
        sample, conv = data[i], data[i]["conversation"]
        numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k) and conv[k])
        sessions = []
        for n in numbers:
            start = session_date(conv[f"session_{n}_date_time"])
            turns = []
            for j, turn in enumerate(conv[f"session_{n}"]):
                text = turn["text"]
                if turn.get("blip_caption"):
                    caption = turn["blip_caption"]
                    text += f" [shares {caption if caption.startswith('a photo') else 'a photo of ' + caption}]"
                turns.append({"dia_id": turn["dia_id"], "speaker": turn["speaker"], "text": text,
                              "timestamp": start + timedelta(seconds=TURN_SECONDS * j)})
            sessions.append({"number": n, "turns": turns})
        questions = []
        for qa in sample["qa"]:
            evidence = clean_evidence(qa.get("evidence") or [])
            if qa.get("category") in CATEGORIES and evidence:
                questions.append({"question": qa["question"], "category": qa["category"], "evidence": evidence})
        out.append({"index": i, "user_id": sample.get("sample_id") or f"conv-{i}", "sessions": sessions,
                    "questions": questions})
    return out


# --- the embedded stack (bench.harness)

def ingest(client, conv: dict, stats: dict) -> None:
    for session in conv["sessions"]:
        session_id = f"{conv['user_id']}-s{session['number']}"
        messages = [{"message_id": t["dia_id"], "sender_id": t["speaker"], "sender_name": t["speaker"],
                     "content": t["text"], "timestamp": t["timestamp"].isoformat()} for t in session["turns"]]
        started = time.perf_counter()
        post_session(client, conv["user_id"], session_id, messages, stats)
        stats["ingest_seconds"] += time.perf_counter() - started


def recall(ranked: list[str], evidence: list[str], k: int) -> float:
    return len(set(ranked[:k]) & set(evidence)) / len(evidence)


# --- flat baselines over the raw turns

def flat_rankings_of(conv: dict, top_k: int, embed_query) -> dict[str, list[list[str]]]:
    turns = [t for s in conv["sessions"] for t in s["turns"]]
    # The same "speaker: text" line the boundary detector embeds, so the cache serves both.
    return flat_rankings([t["dia_id"] for t in turns], [f"{t['speaker']}: {t['text']}" for t in turns],
                         [q["question"] for q in conv["questions"]], top_k, embed_query)


# --- the run

def run(path: Path, indices: list[int], top_k: int, methods: tuple[str, ...], embedding_cache: str | None,
        log=print, keep: bool = False, dump: str | None = None, reuse: str | None = None) -> dict:
    """`reuse`: a var dir kept by an earlier run (--keep); its conversations are searched, not ingested
    again, so a ranking setting is compared on the same memories in minutes."""
    import os

    if {LATE, CHANNEL, GAR} & set(methods):  # ingestion writes the token vectors; each method sets the stage itself below
        os.environ["SEARCH_LATE_INTERACTION"] = "1"
    if {CHANNEL, GAR} & set(methods):  # and their centroid codes
        os.environ["SEARCH_COLBERT_CHANNEL"] = "1"
    if reuse:
        os.environ.setdefault("LLM_DISABLED", "1")
        os.environ.setdefault("SEARCH_ENGINE_TIMEOUT_SECONDS", "600")
        var = setup_django(reuse)
    else:
        var = conversation_stack(embedding_cache)
    try:
        from django.test import override_settings

        from memory.models import Memory

        model = cached_query_embedder()
        client = api_client()
        convs = load(path, indices)
        stats = defaultdict(float)
        rows: dict[str, list[dict]] = defaultdict(list)
        for conv in convs:
            before = stats["ingest_seconds"]
            if not (reuse and Memory.objects.filter(user_id=conv["user_id"]).exists()):
                ingest(client, conv, stats)
            log(f"conv {conv['index']} ({conv['user_id']}): {sum(len(s['turns']) for s in conv['sessions'])} turns "
                f"ingested in {stats['ingest_seconds'] - before:.1f}s; {len(conv['questions'])} questions")
            searched = time.perf_counter()
            for method in methods:
                stage = {"SEARCH_LATE_INTERACTION": method in (LATE, CHANNEL, GAR),
                         "SEARCH_COLBERT_CHANNEL": method in (CHANNEL, GAR), "SEARCH_COLBERT_NEIGHBOURS": method == GAR}
                for q in conv["questions"]:
                    with override_settings(**stage):
                        ranked = search_message_ids(client, q["question"],
                                                    "hybrid" if method in (LATE, CHANNEL, GAR) else method,
                                                    conv["user_id"], top_k)
                    rows[method].append({"conv": conv["index"], "question": q["question"], "category": q["category"],
                                         "ranked": ranked, "evidence": q["evidence"]})
            for name, rankings in flat_rankings_of(conv, top_k, model.embed_query).items():
                rows[name] += [{"conv": conv["index"], "question": q["question"], "category": q["category"],
                                "ranked": r, "evidence": q["evidence"]} for q, r in zip(conv["questions"], rankings)]
            stats["search_seconds"] += time.perf_counter() - searched
        report = summarise(rows, stats, indices, top_k)
        if dump:  # every question's ranked dia_ids per method, for looking at the misses
            Path(dump).write_text(json.dumps(rows, indent=1))
        if keep or reuse:
            report["var_dir"] = str(var)
        return report
    finally:
        # A linked --embedding-cache file is left where it is; a reused var dir may be another run's.
        close_stack(var, keep or bool(reuse), stop=not reuse)


def summarise(rows: dict[str, list[dict]], stats: dict, indices: list[int], top_k: int) -> dict:
    methods = {}
    for name, results in rows.items():
        entry = {"questions": len(results)}
        for k in KS:
            if k <= top_k:
                entry[f"recall@{k}"] = round(float(np.mean([recall(r["ranked"], r["evidence"], k)
                                                            for r in results])), 4)
        entry["by_category"] = {
            CATEGORIES[c]: {f"recall@{k}": round(float(np.mean([recall(r["ranked"], r["evidence"], k)
                                                                   for r in results if r["category"] == c])), 4)
                            for k in KS if k <= top_k}
            for c in sorted({r["category"] for r in results})
        }
        methods[name] = entry
    messages = stats["messages"] or 1
    return {
        "conversations": indices,
        "top_k": top_k,
        "messages": int(stats["messages"]),
        "memories": {k: int(stats[k]) for k in ("episodes", "facts", "merged_duplicates", "superseded")},
        "ingest_seconds": round(stats["ingest_seconds"], 1),
        "ingest_seconds_per_1000_messages": round(stats["ingest_seconds"] * 1000 / messages, 1),
        "search_seconds": round(stats["search_seconds"], 1),
        "methods": methods,
    }


def table(report: dict) -> str:
    ks = [k for k in KS if k <= report["top_k"]]
    cats = list(CATEGORIES.values())
    head = f"{'method':<12}" + "".join(f"{'R@' + str(k):>8}" for k in ks)
    head += "".join(f"{c[:11] + ' R@10':>17}" for c in cats)
    lines = [head, "-" * len(head)]
    for name, m in report["methods"].items():
        cells = "".join(f"{m.get(f'recall@{k}', float('nan')):>8.3f}" for k in ks)
        cells += "".join(f"{m['by_category'].get(c, {}).get('recall@10', float('nan')):>17.3f}" for c in cats)
        lines.append(f"{name:<12}{cells}")
    mem = report["memories"]
    lines += [
        "",
        f"conversations {report['conversations']}: {report['messages']} messages, {mem['episodes']} episodes, "
        f"{mem['facts']} facts ({mem['merged_duplicates']} merged duplicates, {mem['superseded']} superseded)",
        f"ingestion: {report['ingest_seconds']}s = {report['ingest_seconds_per_1000_messages']}s per 1,000 messages "
        f"(API post + flush: segmentation, extraction, embedding, indexing); "
        f"search + baselines {report['search_seconds']}s",
        f"questions per method: {next(iter(report['methods'].values()))['questions'] if report['methods'] else 0}",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", default=str(DEFAULT_PATH), help="locomo10 JSON")
    parser.add_argument("--convs", default="0", help="comma-separated conversation indices (default 0)")
    parser.add_argument("--top-k", type=int, default=20, help="results asked per search (default 20)")
    parser.add_argument("--methods", default=",".join(METHODS), help="search methods (default keyword,vector,hybrid,hybrid+late-interaction — the "
                        "shipped default; hybrid is it with the stage off; also paths)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--embedding-cache", help="reuse this embedding cache file across runs (speed only)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary var dir (database, indexes)")
    parser.add_argument("--dump", help="write every question's ranked dia_ids per method to this JSON file")
    parser.add_argument("--reuse", help="search the conversations of a var dir kept by --keep (no ingestion)")
    args = parser.parse_args(argv)
    try:
        indices = [int(i) for i in args.convs.split(",") if i.strip()]
    except ValueError:
        parser.error("--convs takes comma-separated integers, e.g. 0,1,2")
    methods = tuple(m for m in args.methods.split(",") if m)
    if any(m not in CHOICES for m in methods):
        parser.error(f"--methods must be drawn from {', '.join(CHOICES)}")
    if not 1 <= args.top_k <= 100:
        parser.error("--top-k must be from 1 to 100")
    log = (lambda msg: print(msg, file=sys.stderr)) if args.json else print
    report = run(Path(args.path), indices, args.top_k, methods, args.embedding_cache, log=log, keep=args.keep,
                 dump=args.dump, reuse=args.reuse)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
