"""LongMemEval-S turn-level evidence recall of conversation memory, ingested and searched through the REST API.

    .venv/bin/python -m bench.longmemeval                       # the 18 dev questions in ../shared/data
    .venv/bin/python -m bench.longmemeval --questions 0,3,6 --embedding-cache /tmp/lme-e5.sqlite
    .venv/bin/python -m bench.longmemeval DIR --questions 44_18bc8abd --json --dump ranks.json
    .venv/bin/python -m bench.longmemeval --questions 9,2 --keep --dump a.json    # then, same memories:
    MRAG_FACTS_PER_MESSAGE=1 .venv/bin/python -m bench.longmemeval --questions 9,2 --reuse VAR --dump b.json

Each file of DIR is one question with its own haystack (~50 sessions of user–assistant chat,
~480 turns, the assistant's turns ~1.8 KB), so each question gets its own user. A throwaway
embedded Loci (as in `bench.locomo`) gets every haystack session posted through
`POST /api/v1/memories` and flushed at its end:

- user_id = the question id; session_id = the haystack session id;
- message_id = "<session id>:<turn index>", sender = role ("user" / "assistant"), timestamp =
  the session's `haystack_dates` entry plus 30 s per turn.

The question is then searched (top_k=20, filtered to its user) with each method; results map to
message ids as in `bench.locomo` (k counts message ids, not items). The evidence is the turns with
`has_answer`: any@k = some evidence turn among the first k ids, all@k = every one. Flat baselines
over the raw turns ("role: text") of the same haystack run in the same process: BM25, dense e5,
their RRF. Ingestion time is wall and CPU (this process, which runs the API, extraction and
embedding in-process, plus the Milvus Lite server), per 1,000 turns and per MB of turn text.
The stack, the posting, the mapping of results to message ids and the flat baselines are
bench.harness's, shared with bench.locomo.
"""

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from bench.harness import (MEMORY_COUNTS, SHARED_DATA, api_client, cached_query_embedder, call, close_stack,
                           conversation_stack, flat_rankings, post_session, ranked_message_ids, setup_django)

DEFAULT_DIR = SHARED_DATA / "longmemeval_s_dev"
TYPES = ("single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
         "temporal-reasoning", "knowledge-update")
METHODS = ("keyword", "vector", "hybrid", "hybrid+late", "hybrid+coverage", "hybrid+late+coverage")
COVERED_WEIGHT = 0.8  # SEARCH_COVERED_WEIGHT of "+coverage", chosen on LoCoMo dev conversations (bench.rank_stages)
KS = (5, 10)
TURN_SECONDS = 30


def haystack_date(text: str) -> datetime:
    """'2023/05/01 (Mon) 10:42' → an aware datetime."""
    day, _, clock = text.split(" ")
    return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=timezone.utc)


def files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.json"))


def select(paths: list[Path], spec: str | None) -> list[Path]:
    """--questions: comma-separated indices into the sorted files, or question ids / file stems."""
    if not spec:
        return paths
    out = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        if part.isdigit() and int(part) < len(paths):
            out.append(paths[int(part)])
            continue
        match = [p for p in paths if p.stem == part or p.stem.split("_", 1)[-1] == part]
        if not match:
            raise ValueError(f"no question {part!r} in {len(paths)} files")
        out.append(match[0])
    return out


def load(path: Path) -> dict:
    data = json.loads(path.read_text())
    sessions, evidence = [], []
    for sid, date, turns in zip(data["haystack_session_ids"], data["haystack_dates"], data["haystack_sessions"]):
        start = haystack_date(date)
        rows = []
        for j, turn in enumerate(turns):
            mid = f"{sid}:{j}"
            rows.append({"message_id": mid, "role": turn["role"], "text": turn["content"],
                         "timestamp": start + timedelta(seconds=TURN_SECONDS * j)})
            if turn.get("has_answer"):
                evidence.append(mid)
        sessions.append({"session_id": sid, "turns": rows})
    return {"id": data["question_id"], "file": path.name, "type": data["question_type"],
            "question": data["question"], "question_date": data["question_date"], "sessions": sessions,
            "evidence": evidence, "evidence_roles": sorted({t["role"] for s in sessions for t in s["turns"]
                                                           if t["message_id"] in evidence})}


def cpu_seconds(var: Path) -> float:
    """CPU of this process plus the Milvus Lite server's milvus binary (read from /proc)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    total = usage.ru_utime + usage.ru_stime
    try:
        record = json.loads((var / ".milvus.db.server.json").read_text())
        for pid in (record.get("pid"), record.get("milvus_pid")):
            raw = Path(f"/proc/{int(pid)}/stat").read_text()
            fields = raw[raw.rfind(")") + 2:].split()
            total += (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime in clock ticks (USER_HZ)
    except (OSError, ValueError, TypeError, KeyError):
        pass
    return total


def ingest(client, q: dict, stats: dict, var: Path) -> None:
    for session in q["sessions"]:
        messages = [{"message_id": t["message_id"], "sender_id": t["role"], "sender_name": t["role"],
                     "role": t["role"], "content": t["text"], "timestamp": t["timestamp"].isoformat()}
                    for t in session["turns"]]
        if not messages:
            continue
        started, cpu = time.perf_counter(), cpu_seconds(var)
        post_session(client, q["id"], session["session_id"], messages, stats)
        stats["ingest_seconds"] += time.perf_counter() - started
        stats["ingest_cpu_seconds"] += cpu_seconds(var) - cpu
        stats["bytes"] += sum(len(m["content"].encode()) for m in messages)


def flat_rankings_of(q: dict, top_k: int, embed_query) -> dict[str, list[str]]:
    turns = [t for s in q["sessions"] for t in s["turns"]]
    rankings = flat_rankings([t["message_id"] for t in turns], [f"{t['role']}: {t['text']}" for t in turns],
                             [q["question"]], top_k, embed_query)
    return {name: ranked[0] for name, ranked in rankings.items()}


def ingested_users(client) -> set[str]:
    """The users a reused var dir already holds memories of (their questions are not ingested again)."""
    from memory.models import Memory

    return set(Memory.objects.values_list("user_id", flat=True).distinct())


def hit_any(ranked: list[str], evidence: list[str], k: int) -> float:
    return float(bool(set(ranked[:k]) & set(evidence)))


def hit_all(ranked: list[str], evidence: list[str], k: int) -> float:
    return float(set(evidence) <= set(ranked[:k]))


def session_of(message_id: str) -> str:
    return message_id.rsplit(":", 1)[0]


def session_hit_any(ranked: list[str], evidence: list[str], k: int) -> float:
    """Session level, as the published LongMemEval retrieval anchors: one of the first k distinct
    sessions of the ranked messages holds an evidence turn."""
    sessions = list(dict.fromkeys(session_of(m) for m in ranked))
    return float(bool(set(sessions[:k]) & {session_of(m) for m in evidence}))


def distinct_messages(row: dict, k: int) -> int:
    """Distinct source messages among the first k items of the list (a flat list's items are messages)."""
    if "items" not in row:
        return len(row["ranked"][:k])
    return len({m for item in row["items"][:k] for m in item[2]})


def question_time(q: dict) -> str:
    return haystack_date(q["question_date"]).isoformat()


def run(paths: list[Path], top_k: int, methods: tuple[str, ...], embedding_cache: str | None, log=print,
        keep: bool = False, dump: str | None = None, reuse: str | None = None, dated: bool = False) -> dict:
    """`reuse`: a var dir kept by an earlier run (--keep); its users are searched, not ingested again,
    so a ranking setting can be compared on the same memories in seconds. `dated`: searches carry the
    question's date as their reference time."""
    if reuse:
        os.environ.setdefault("LLM_DISABLED", "1")
        os.environ.setdefault("SEARCH_ENGINE_TIMEOUT_SECONDS", "600")
        var = setup_django(reuse)  # an existing var dir is kept as it is (and migrated)
    else:
        var = conversation_stack(embedding_cache)
    try:
        from django.test import override_settings

        model = cached_query_embedder()
        client = api_client()
        done = ingested_users(client) if reuse else set()
        stats = defaultdict(float, per_question={})
        rows: dict[str, list[dict]] = defaultdict(list)
        for path in paths:
            q = load(path)
            turns = sum(len(s["turns"]) for s in q["sessions"])
            wall, cpu = stats["ingest_seconds"], stats["ingest_cpu_seconds"]
            if q["id"] not in done:
                ingest(client, q, stats, var)
                log(f"{q['file']} ({q['type']}): {turns} turns ingested in {stats['ingest_seconds'] - wall:.1f}s "
                    f"wall, {stats['ingest_cpu_seconds'] - cpu:.1f} CPU-s")
            searched = time.perf_counter()
            row = {"id": q["id"], "type": q["type"], "question": q["question"], "evidence": q["evidence"]}
            for method in methods:
                base, *stages = method.split("+")
                body = {"query": q["question"], "method": base, "top_k": top_k, "filters": {"user_id": q["id"]}}
                if dated:
                    body["reference_time"] = question_time(q)
                with override_settings(**stage_settings(stages)):
                    response = call(client, "post", "/api/v1/memories/search", body)
                rows[method].append({**row, "ranked": ranked_message_ids(response, base),
                                     "items": _items(response)})
            for name, ranked in flat_rankings_of(q, top_k, model.embed_query).items():
                rows[name].append({**row, "ranked": ranked})
            stats["search_seconds"] += time.perf_counter() - searched
            if q["id"] not in done:
                stats["per_question"][q["id"]] = {"turns": turns, "wall": round(stats["ingest_seconds"] - wall, 1),
                                                  "cpu": round(stats["ingest_cpu_seconds"] - cpu, 1)}
            if dump:  # after every question, so a run stopped early still leaves what it measured
                Path(dump).write_text(json.dumps(rows, indent=1))
                done_names = [p.name for p in paths][:len(rows[methods[0]])]
                Path(dump + ".report.json").write_text(json.dumps(summarise(rows, stats, done_names, top_k), indent=1))
        report = summarise(rows, stats, [p.name for p in paths], top_k)
        if dump:
            Path(dump).write_text(json.dumps(rows, indent=1))
        if keep or reuse:
            report["var_dir"] = str(var)
        return report
    finally:
        close_stack(var, keep or bool(reuse), stop=not reuse)  # a reused var dir may be another run's


def stage_settings(stages: list[str]) -> dict:
    """A method's "+late" / "+coverage" suffixes as settings; without them both stages are off."""
    return {"SEARCH_LATE_INTERACTION": "late" in stages,
            "SEARCH_COVERED_WEIGHT": COVERED_WEIGHT if "coverage" in stages else 1.0}


def _items(response: dict) -> list[list]:
    """What filled the list, for --dump: [kind, score, its message ids, its first 80 characters]."""
    out = [["episode", e["score"], [s["message_id"] for s in e.get("sources", []) if s.get("type") == "message"],
            (e.get("episode") or e.get("summary") or "")[:80]] for e in response.get("episodes", [])]
    out += [["fact", f["score"], [s["message_id"] for s in f.get("sources", []) if s.get("type") == "message"],
             (f.get("atomic_fact") or "")[:80]] for f in response.get("facts", [])]
    return sorted(out, key=lambda item: -item[1])


def _scores(results: list[dict]) -> dict:
    out = {}
    for k in KS:
        out[f"any@{k}"] = round(float(np.mean([hit_any(r["ranked"], r["evidence"], k) for r in results])), 3)
        out[f"all@{k}"] = round(float(np.mean([hit_all(r["ranked"], r["evidence"], k) for r in results])), 3)
        out[f"session any@{k}"] = round(float(np.mean([session_hit_any(r["ranked"], r["evidence"], k)
                                                       for r in results])), 3)
        out[f"distinct messages in {k} items"] = round(float(np.mean([distinct_messages(r, k) for r in results])), 1)
    return out


def summarise(rows: dict[str, list[dict]], stats: dict, names: list[str], top_k: int) -> dict:
    methods = {}
    for name, results in rows.items():
        methods[name] = {"questions": len(results), **_scores(results),
                         "by_type": {t: _scores([r for r in results if r["type"] == t])
                                     for t in TYPES if any(r["type"] == t for r in results)}}
    turns, mb = stats["messages"] or 1, (stats["bytes"] or 1) / 1e6
    return {
        "questions": names,
        "top_k": top_k,
        "messages": int(stats["messages"]),
        "megabytes": round(stats["bytes"] / 1e6, 2),
        "memories": {k: int(stats[k]) for k in MEMORY_COUNTS},
        "ingest_seconds": round(stats["ingest_seconds"], 1),
        "ingest_cpu_seconds": round(stats["ingest_cpu_seconds"], 1),
        "per_1000_turns": {"wall": round(stats["ingest_seconds"] * 1000 / turns, 1),
                           "cpu": round(stats["ingest_cpu_seconds"] * 1000 / turns, 1)},
        "per_mb": {"wall": round(stats["ingest_seconds"] / mb, 1), "cpu": round(stats["ingest_cpu_seconds"] / mb, 1)},
        "search_seconds": round(stats["search_seconds"], 1),
        "ingestion_per_question": stats["per_question"],
        "methods": methods,
    }


def table(report: dict) -> str:
    cols = [f"{m}@{k}" for m in ("any", "all", "session any") for k in KS]
    types = sorted({t for m in report["methods"].values() for t in m["by_type"]}, key=TYPES.index)
    head = f"{'method':<12}" + "".join(f"{c:>15}" for c in cols) + "".join(f"{'distinct/' + str(k):>12}" for k in KS) + "".join(f"{t[:14] + ' all@10':>22}" for t in types)
    lines = [head, "-" * len(head)]
    for name, m in report["methods"].items():
        cells = "".join(f"{m[c]:>15.3f}" for c in cols)
        cells += "".join(f"{m[f'distinct messages in {k} items']:>12.1f}" for k in KS)
        cells += "".join(f"{m['by_type'][t]['all@10']:>22.3f}" for t in types)
        lines.append(f"{name:<12}{cells}")
    mem = report["memories"]
    lines += [
        "",
        f"{len(report['questions'])} questions ({', '.join(report['questions'])}): {report['messages']} turns, "
        f"{report['megabytes']} MB, {mem['episodes']} episodes, {mem['facts']} facts "
        f"({mem['merged_duplicates']} merged duplicates, {mem['superseded']} superseded)",
        f"ingestion: {report['ingest_seconds']}s wall, {report['ingest_cpu_seconds']} CPU-s; per 1,000 turns "
        f"{report['per_1000_turns']['wall']}s wall / {report['per_1000_turns']['cpu']} CPU-s; per MB "
        f"{report['per_mb']['wall']}s wall / {report['per_mb']['cpu']} CPU-s; search + baselines "
        f"{report['search_seconds']}s",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", default=str(DEFAULT_DIR), help="directory of LongMemEval question files")
    parser.add_argument("--questions", help="subset: comma-separated indices into the sorted files, or question ids")
    parser.add_argument("--top-k", type=int, default=20, help="results asked per search (default 20)")
    parser.add_argument("--methods", default="keyword,vector,hybrid", help="search methods (default keyword,vector,hybrid; "
                        "also hybrid+late, hybrid+coverage, hybrid+late+coverage: the stages on)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--embedding-cache", help="reuse this embedding cache file across runs (speed only)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary var dir (database, indexes)")
    parser.add_argument("--dump", help="write every question's ranked message ids per method to this JSON file")
    parser.add_argument("--reuse", help="search the memories of a var dir kept by --keep (no ingestion of its users)")
    parser.add_argument("--dated", action="store_true", help="searches carry the question date as reference_time")
    args = parser.parse_args(argv)
    try:
        paths = select(files(Path(args.path)), args.questions)
    except ValueError as e:
        parser.error(str(e))
    if not paths:
        parser.error(f"no question files in {args.path}")
    methods = tuple(m for m in args.methods.split(",") if m)
    if any(m not in METHODS for m in methods):
        parser.error(f"--methods must be drawn from {', '.join(METHODS)}")
    if not 1 <= args.top_k <= 100:
        parser.error("--top-k must be from 1 to 100")
    log = (lambda msg: print(msg, file=sys.stderr)) if args.json else print
    report = run(paths, args.top_k, methods, args.embedding_cache, log=log, keep=args.keep, dump=args.dump,
                 reuse=args.reuse, dated=args.dated)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
