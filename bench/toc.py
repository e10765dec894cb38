"""Section questions: does a search's top 5 reach the section that answers? (issue 39, the TOC method)

    python -m bench.toc [--questions bench/toc_questions.json,bench/toc_questions_fresh.json]
                        [--methods hybrid,hybrid-chunks,navigate] [--json]

Ingests the questions' files (of every questions file, once) (embedded stack, fresh var dir, no LLM), then asks each question with
each method. An item reaches a section when one of its sources is a chunk of the question's file whose
section_path starts with one of the question's answering paths (a subsection counts). Per method:
section recall@1 and @5 over the merged order (the response's `rank`), and CPU-ms a query.
Methods: `hybrid` asks for episodes, facts and chunks (the console's default), `hybrid-chunks` for
chunks only, `navigate` is the table-of-contents method (it answers with chunks).
"""

import argparse
import json
import logging
import os
import time
from pathlib import Path

from bench.harness import SHARED_DATA, cpu_seconds, setup_django

DOCS = SHARED_DATA / "docs"
DEFAULT_QUESTIONS = ",".join(str(Path(__file__).with_name(n)) for n in ("toc_questions.json", "toc_questions_fresh.json"))
METHODS = {
    "hybrid": ("hybrid", ["episode", "atomic_fact", "chunk"]),
    "hybrid-chunks": ("hybrid", ["chunk"]),
    "navigate": ("navigate", ["chunk"]),
}


def ranked_items(response: dict) -> list[dict]:
    items = response["facts"] + response["episodes"] + response.get("chunks", [])
    return sorted(items, key=lambda it: it.get("rank", 10**6))


def reaches(item: dict, document_id: int, paths: list[list[str]]) -> bool:
    for source in item.get("sources", []):
        here = source.get("section_path") or []
        if source.get("document_id") == document_id and any(here[:len(p)] == p for p in paths):
            return True
    return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", default=DEFAULT_QUESTIONS, help="questions files, comma-separated: a row each")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--var-dir", help="keep the data in this directory (default: a fresh temporary one)")
    args = parser.parse_args(argv)
    sets = {Path(f).stem: json.loads(Path(f).read_text())["questions"] for f in args.questions.split(",")}
    questions = [q for qs in sets.values() for q in qs]
    os.environ.setdefault("LLM_DISABLED", "1")  # the deterministic extractor: no model calls
    setup_django(args.var_dir)
    logging.disable(logging.WARNING)

    from django.db import transaction

    from bench.harness import make_scope
    from ingest.actions import ingest_document
    from memory.models import Chunk, Document
    from retrieval.request import parse_search_request
    from retrieval.search import search

    scope, kb = make_scope("toc", "toc")
    started, cpu = time.perf_counter(), cpu_seconds()
    document_of = {}
    for source in dict.fromkeys(q["file"] for q in questions):
        path = DOCS / source
        with path.open("rb") as fh, transaction.atomic():
            document_of[source] = ingest_document(scope, kb, fh, path.name).document.pk
    ingest = {"wall_s": round(time.perf_counter() - started, 1), "cpu_s": round(cpu_seconds() - cpu, 1),
              "documents": len(document_of), "failed": list(Document.objects.filter(status="failed")
                                                            .values_list("filename", flat=True)),
              "chunks": Chunk.objects.filter(level="child").count(),
              "sections": Chunk.objects.filter(level="parent").count()}

    rows, misses = {}, {}
    for (set_name, qs), name in ((s, m) for s in sets.items() for m in args.methods.split(",")):
        method, kinds = METHODS[name]
        at1 = at5 = 0
        cpu = cpu_seconds()
        for q in qs:
            response = search(scope, parse_search_request({"query": q["q"], "method": method, "top_k": 10,
                                                           "memory_types": kinds}))
            hits = [reaches(it, document_of[q["file"]], q["sections"]) for it in ranked_items(response)[:5]]
            at1 += bool(hits and hits[0])
            at5 += any(hits)
            if not any(hits):
                misses.setdefault(f"{set_name} {name}", []).append(q["q"])
        n = len(qs)
        rows[f"{set_name} {name}"] = {"recall@1": round(at1 / n, 3), "recall@5": round(at5 / n, 3), "questions": n,
                      "cpu_ms_a_query": round((cpu_seconds() - cpu) * 1000 / n, 1)}
    out = {"ingest": ingest, "methods": rows, "misses": misses}
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return
    print(f"ingest: {ingest}")
    print(f"{'questions, method':<36} {'recall@1':>9} {'recall@5':>9} {'CPU-ms/q':>9}")
    for name, row in rows.items():
        print(f"{name:<36} {row['recall@1']:>9} {row['recall@5']:>9} {row['cpu_ms_a_query']:>9}")
    for name, qs in misses.items():
        print(f"missed by {name}: {qs}")


if __name__ == "__main__":
    main()
