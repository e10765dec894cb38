"""Broad questions: does a search's top 5 reach the sections or sessions that answer? (issue 39, the summary tree)

    python -m bench.summary_tree [--questions bench/broad_questions.json] [--parts dev,held_out]
                                 [--var-dir DIR] [--reuse] [--json]

Ingests the questions' files and LoCoMo conversations (embedded stack, no LLM) with SUMMARY_TREE on,
timing the tree's own share of the ingestion CPU (every call of summary_tree.refresh), then asks each
question with each method. A document item reaches a section when one of its sources is a chunk of
the question's file whose section_path starts with one of the answering paths (bench.toc's rule); a
chat item reaches a session when one of its sources is a message of that session (LoCoMo dia_id
"D3:5" is session 3). Per part and method: recall@5 (some top-5 item reaches an answer), coverage@5
(the share of the answering sections or sessions the top 5 reach together), how often a tree node is
in the top 5, and CPU-ms a query. Methods: `hybrid` (episodes, facts, and for documents chunks: the
console's default) without the tree, `hybrid+tree` the same with SUMMARY_TREE_IN_HYBRID, `summary`
the tree's nodes alone (memory_types ["summary"]), `navigate` the table-of-contents method (documents).
A tree node cites every section or session under it, so it reaches all of them: coverage rewards a
broad answer by construction, recall@5 less so.
"""

import argparse
import importlib
import json
import logging
import os
import re
import time
from pathlib import Path

from bench.harness import SHARED_DATA, cpu_seconds, make_scope, setup_django
from bench.toc import ranked_items

DOCS = SHARED_DATA / "docs"
LOCOMO = SHARED_DATA / "locomo" / "locomo10_dev.json"
DEFAULT_QUESTIONS = str(Path(__file__).with_name("broad_questions.json"))
METHODS = ("hybrid", "hybrid+tree", "summary", "navigate")
_SESSION = re.compile(r"^D(\d+):\d+$")


def request(method: str, question: dict) -> tuple[dict, bool]:
    """The search body for a method and whether the tree joins hybrid (SUMMARY_TREE_IN_HYBRID)."""
    chat = "conversation" in question
    body = {"query": question["q"], "top_k": 10}
    if chat:
        body["filters"] = {"user_id": f"conv-{question['conversation']}"}
    if method == "summary":
        return {**body, "method": "hybrid", "memory_types": ["summary"]}, False
    if method == "navigate":
        return {**body, "method": "navigate", "memory_types": ["chunk"]}, False
    kinds = ["episode", "atomic_fact"] + ([] if chat else ["chunk"])
    return {**body, "method": "hybrid", "memory_types": kinds}, method == "hybrid+tree"


def answers_reached(item: dict, question: dict, document_of: dict) -> set:
    """The question's answering sections (as tuples) or sessions (numbers) this item's sources reach."""
    reached = set()
    for source in item.get("sources", []):
        if "conversation" in question:
            match = _SESSION.match(str(source.get("message_id", "")))
            if source.get("type") == "message" and match and int(match.group(1)) in question["sessions"]:
                reached.add(int(match.group(1)))
        elif source.get("document_id") == document_of.get(question["file"]):
            here = source.get("section_path") or []
            reached |= {tuple(p) for p in question["sections"] if here[:len(p)] == p}
    return reached


def ingest(questions: list[dict], tree_cpu: list[float]) -> dict:
    from django.db import transaction

    from bench.locomo import load
    from conversations.actions import accumulate_messages, flush_session
    from ingest.actions import ingest_document
    from memory.models import Document, Memory
    tree_refresh = importlib.import_module("retrieval.summary_tree.refresh")  # the module, not its function

    original = tree_refresh.refresh

    def timed_refresh(*args, **kwargs):  # the tree's share of the ingestion CPU
        started = cpu_seconds()
        try:
            return original(*args, **kwargs)
        finally:
            tree_cpu.append(cpu_seconds() - started)

    tree_refresh.refresh = timed_refresh
    out = {}
    scope, kb = make_scope("broad", "docs")
    started, cpu, tree_before = time.perf_counter(), cpu_seconds(), len(tree_cpu)
    for source in dict.fromkeys(q["file"] for q in questions if "file" in q):
        path = DOCS / source
        with path.open("rb") as fh, transaction.atomic():
            ingest_document(scope, kb, fh, path.name)
    out["documents"] = {"wall_s": round(time.perf_counter() - started, 1), "cpu_s": round(cpu_seconds() - cpu, 1),
                        "tree_cpu_s": round(sum(tree_cpu[tree_before:]), 1),
                        "failed": list(Document.objects.filter(status="failed").values_list("filename", flat=True)),
                        "episodes": Memory.objects.filter(kb=kb, kind="episode").count(),
                        "nodes": Memory.objects.filter(kb=kb, kind="summary").count()}
    chats, chat_kb = make_scope("broad", "chats")
    started, cpu, tree_before = time.perf_counter(), cpu_seconds(), len(tree_cpu)
    indices = sorted({q["conversation"] for q in questions if "conversation" in q})
    for conv in load(LOCOMO, indices):
        user = f"conv-{conv['index']}"
        for session in conv["sessions"]:
            messages = [{"message_id": t["dia_id"], "sender_id": t["speaker"], "sender_name": t["speaker"],
                         "content": t["text"], "timestamp": t["timestamp"].isoformat()} for t in session["turns"]]
            session_id = f"{user}-s{session['number']}"
            accumulate_messages(chats, chat_kb, user_id=user, session_id=session_id, messages=messages)
            flush_session(chats, chat_kb, user_id=user, session_id=session_id)
    out["chats"] = {"wall_s": round(time.perf_counter() - started, 1), "cpu_s": round(cpu_seconds() - cpu, 1),
                    "tree_cpu_s": round(sum(tree_cpu[tree_before:]), 1), "tree_builds": len(tree_cpu) - tree_before,
                    "episodes": Memory.objects.filter(kb=chat_kb, kind="episode").count(),
                    "nodes": Memory.objects.filter(kb=chat_kb, kind="summary").count()}
    return out


def rebuild_trees() -> dict:
    """On reused data: the trees made current (after a change to the tree's code), timed."""
    from retrieval import summary_tree
    from tenants.models import Tenant

    cpu = cpu_seconds()
    nodes = summary_tree.refresh_tenant(Tenant.objects.get(slug="broad"), index=True)
    return {"reused": True, "nodes_rebuilt": nodes, "tree_cpu_s": round(cpu_seconds() - cpu, 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", default=DEFAULT_QUESTIONS)
    parser.add_argument("--parts", default="dev,held_out")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--var-dir", help="keep the data in this directory (default: a fresh temporary one)")
    parser.add_argument("--reuse", action="store_true", help="search the data an earlier run kept in --var-dir")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    questions = json.loads(Path(args.questions).read_text())["questions"]
    os.environ.setdefault("LLM_DISABLED", "1")  # the deterministic extractor and summaries: no model calls
    os.environ["SUMMARY_TREE"] = "1"
    setup_django(args.var_dir)
    logging.disable(logging.WARNING)

    from django.test import override_settings

    from memory.models import Document
    from retrieval.request import parse_search_request
    from retrieval.search import search

    ingested = rebuild_trees() if args.reuse else ingest(questions, [])
    scope, _ = make_scope("broad", "docs")
    chats, _ = make_scope("broad", "chats")
    document_of = {}
    for q in questions:
        if "file" in q:
            document_of[q["file"]] = Document.objects.filter(filename=Path(q["file"]).name).values_list(
                "pk", flat=True).first()
    rows, misses = {}, {}
    for part in args.parts.split(","):
        for kind in ("docs", "chats"):
            qs = [q for q in questions if q["part"] == part and (("file" in q) == (kind == "docs"))]
            for method in args.methods.split(","):
                if method == "navigate" and kind == "chats":
                    continue  # navigate descends a document's sections: a chat has none
                at5 = cover = with_node = 0.0
                cpu = cpu_seconds()
                for q in qs:
                    body, in_hybrid = request(method, q)
                    with override_settings(SUMMARY_TREE_IN_HYBRID=in_hybrid):
                        response = search(chats if kind == "chats" else scope, parse_search_request(body))
                    top = ranked_items(response)[:5]
                    reached = [answers_reached(it, q, document_of) for it in top]
                    wanted = len(q["sessions"] if kind == "chats" else q["sections"])
                    at5 += any(reached)
                    cover += len(set().union(*reached)) / wanted if reached else 0.0
                    with_node += any(it.get("memory_type") == "summary" for it in top)
                    if not any(reached):
                        misses.setdefault(f"{part} {kind} {method}", []).append(q["q"])
                n = len(qs) or 1
                rows[f"{part} {kind} {method}"] = {
                    "recall@5": round(at5 / n, 3), "coverage@5": round(cover / n, 3),
                    "node_in_top5": round(with_node / n, 3), "questions": len(qs),
                    "cpu_ms_a_query": round((cpu_seconds() - cpu) * 1000 / n, 1)}
    out = {"ingest": ingested, "methods": rows, "misses": misses}
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return
    print(f"ingest: {ingested}")
    print(f"{'part, kind, method':<30} {'recall@5':>9} {'cover@5':>9} {'node@5':>8} {'n':>4} {'CPU-ms/q':>9}")
    for name, row in rows.items():
        print(f"{name:<30} {row['recall@5']:>9} {row['coverage@5']:>9} {row['node_in_top5']:>8} "
              f"{row['questions']:>4} {row['cpu_ms_a_query']:>9}")
    for name, qs in misses.items():
        if name.startswith("dev"):  # the held-out part's questions are not shown: they are not tuned on
            print(f"missed by {name}: {qs}")


if __name__ == "__main__":
    main()
