"""Document QA: does the first item answer the question? Real files of every format, English and Chinese.

    python -m bench.docqa [--questions bench/docqa_questions.json] [--top-k 10] [--json] [--dump misses.json]
                          [--memory-types episode,atomic_fact,chunk] [--methods hybrid,hybrid+bridge:0.5:2]

Ingests every source file of the questions (embedded stack, fresh var dir, no LLM), then asks each
question with keyword, vector and hybrid search, asking for facts, episodes and chunks (what the
console shows by default; `--memory-types episode,atomic_fact` for the API's default). Per method: the answer in the first item (first),
the answer in the first 200 characters of the merged order's text (ans@200), and the rank of the
first answering item (MRR over the top-k, and how many questions have one at all). An item answers
when an answer string appears in its text (case- and space-insensitively) and it comes from the
question's source file or a copy of it (the questions file's `copies`: the same table as CSV, TSV
and a sheet, a page as PDF and as a scan, one e-mail as .eml and .msg). Beside them, in the same run, flat BM25 and flat dense (the same embedder)
over the child chunks of the same documents. Rows per question kind and for the cross-language
questions follow the totals.

"Merged order": the response's own `rank` when its items carry one; otherwise facts, episodes and
chunks pooled and sorted by score (what bench.cmrc does).
"""

import argparse
import json
import logging
import os
import re
import sys
import time
from functools import lru_cache
from pathlib import Path

from bench.harness import SHARED_DATA, setup_django

DOCS = SHARED_DATA / "docs"
DEFAULT_QUESTIONS = Path(__file__).with_name("docqa_questions.json")
WINDOW = 200


def normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text).casefold()


def merged_items(response: dict) -> list[dict]:
    """Every item of a response in the order a user is shown them."""
    items = [e for e in response["episodes"] if not e.get("scores", {}).get("via_fact")]
    if not response["facts"]:  # flat methods nest fact hits under their episode
        items += [f for e in response["episodes"] for f in e.get("atomic_facts", [])]
    items += response["facts"] + response.get("chunks", [])
    if items and all("rank" in it for it in items):
        return sorted(items, key=lambda it: it["rank"])
    return sorted(items, key=lambda it: it["score"], reverse=True)


def item_text(item: dict) -> str:
    return item.get("atomic_fact") or item.get("summary") or item.get("text") or ""


def kind_of(item: dict) -> str:
    return "fact" if "atomic_fact" in item else "episode" if "summary" in item else "chunk"


def item_documents(item: dict) -> set[int]:
    return {s["document_id"] for s in item.get("sources", []) if s.get("document_id")}


class Scores:
    def __init__(self):
        self.n = self.first = self.window = self.found = 0
        self.reciprocal = 0.0

    def add(self, answering: list[bool], context: str, answers: list[str]) -> int | None:
        """answering: per ranked item, whether it answers; returns the 1-based rank of the first."""
        self.n += 1
        rank = next((i + 1 for i, ok in enumerate(answering) if ok), None)
        self.first += rank == 1
        self.window += any(normalised(a) in normalised(context)[:WINDOW] for a in answers)
        if rank:
            self.found += 1
            self.reciprocal += 1 / rank
        return rank

    def row(self) -> dict:
        n = max(1, self.n)
        return {"n": self.n, "first": round(self.first / n, 3), f"ans@{WINDOW}": round(self.window / n, 3),
                "MRR": round(self.reciprocal / n, 3), "found": self.found}


def load_questions(path: Path) -> tuple[list[dict], dict[str, set[str]]]:
    """The questions, and for each source file the set of files that count as it (itself and its copies)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    questions = data["questions"]
    for q in questions:
        if not (DOCS / q["source"]).is_file():
            raise SystemExit(f"{q['id']}: source file {q['source']} is not under {DOCS}")
    same = {q["source"]: {q["source"]} for q in questions}
    for group in data.get("copies", []):
        for name in group:
            same.setdefault(name, {name}).update(group)
    return questions, same


def groups(q: dict) -> list[str]:
    out = ["all", f"kind:{q['kind']}", f"lang:{q['lang']}"]
    if q.get("cross_language"):
        out.append("cross-language")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", default=str(DEFAULT_QUESTIONS))
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--methods", default="keyword,vector,hybrid")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--memory-types", default="episode,atomic_fact,chunk",
                        help="what each search asks for (the console's default: all three)")
    parser.add_argument("--dump", help="write every question's ranks and first items to this JSON file")
    parser.add_argument("--var-dir", help="keep the data in this directory (default: a fresh temporary one)")
    parser.add_argument("--reuse", action="store_true", help="with --var-dir: ask the documents a previous run ingested")
    args = parser.parse_args(argv)
    questions, same_as = load_questions(Path(args.questions))
    os.environ.setdefault("LLM_DISABLED", "1")  # the embedded stack without an LLM: the deterministic extractor
    setup_django(args.var_dir)
    logging.disable(logging.WARNING)

    from django.conf import settings
    from django.db import transaction
    from django.test import override_settings

    from bench.flat import FlatBM25, dense_top
    from bench.harness import make_scope
    from ingest.actions import ingest_document
    from memory.models import Chunk, Document, Memory
    from retrieval.embeddings import embedder
    from retrieval.request import parse_search_request
    from retrieval.search import search

    model = embedder()
    model.embed_query = lru_cache(maxsize=None)(model.embed_query)  # vector, hybrid and flat dense share it
    scope, kb = make_scope("docqa", "docqa")
    started = time.perf_counter()
    document_of = {}
    existing = {}
    if args.reuse:
        for pk, filename in Document.objects.filter(kb=kb, status="ready").order_by("pk").values_list("pk", "filename"):
            existing.setdefault(filename, pk)
    for source in dict.fromkeys(q["source"] for q in questions):
        path = DOCS / source
        if path.name in existing:
            document_of[source] = existing[path.name]
            continue
        with path.open("rb") as fh, transaction.atomic():
            document_of[source] = ingest_document(scope, kb, fh, path.name).document.pk
    ingest_seconds = time.perf_counter() - started
    failed = list(Document.objects.filter(status="failed").values_list("filename", flat=True))
    facts = Memory.objects.filter(kind="atomic_fact").count()

    results = {m: {} for m in args.methods.split(",")}
    dump = {q["id"]: {"question": q["question"], "answers": q["answers"], "source": q["source"]} for q in questions}

    def score(name: str, q: dict, ranked: list[tuple[str, set[int]]], kinds: list[str] = ()) -> None:
        wanted = {document_of[name] for name in same_as[q["source"]] if name in document_of}
        answers = [normalised(a) for a in q["answers"]]
        answering = [bool(wanted & docs) and any(a in normalised(text) for a in answers) for text, docs in ranked]
        context = "".join(text for text, _ in ranked)
        table = results.setdefault(name, {})
        rank = None
        for group in groups(q):
            rank = table.setdefault(group, Scores()).add(answering, context, q["answers"])
        dump[q["id"]][name] = {"rank": rank, "top": [
            {"kind": kind, "answers": ok, "docs": sorted(docs), "text": text[:160]}
            for (text, docs), ok, kind in zip(ranked[:3], answering, list(kinds) + [""] * 3)]}

    cpu_ms = {}
    from retrieval.search import query_bridge

    senses = query_bridge.SENSES
    if "+bridge" in args.methods:  # read the dictionary outside the timing
        query_bridge.dictionary()
    if "+ml" in args.methods:  # build/load the reranker outside the timing
        from retrieval.search import multilingual

        multilingual.model().rerank("warm", ["up"])
    for method in args.methods.split(","):
        # "hybrid+rerank": the same method with the rerank stage asked for (RERANK_* / RERANK_MULTILINGUAL);
        # "+late": with the late-interaction stage (SEARCH_LATE_INTERACTION), off in every other method.
        base, *stages = method.split("+")
        # "+ml": the multilingual rescoring stage (SEARCH_MULTILINGUAL_RERANK), off in every other method.
        settings.SEARCH_MULTILINGUAL_RERANK = "ml" in stages
        # "+bridge[:W[:S]]": the query bridge (SEARCH_QUERY_BRIDGE) at weight W, S senses per word.
        bridge = next((s.split(":") for s in stages if s.startswith("bridge")), None)
        bridged = {"SEARCH_QUERY_BRIDGE": bridge is not None}
        if bridge and len(bridge) > 1:
            bridged["SEARCH_QUERY_BRIDGE_WEIGHT"] = float(bridge[1])
        query_bridge.SENSES = int(bridge[2]) if bridge and len(bridge) > 2 else senses
        spent = time.process_time()
        for q in questions:
            with override_settings(SEARCH_LATE_INTERACTION="late" in stages, **bridged):
                response = search(scope, parse_search_request({"query": q["question"], "method": base,
                                                              "top_k": args.top_k, "rerank": "rerank" in stages,
                                                              "memory_types": args.memory_types.split(",")}))
            items = merged_items(response)
            score(method, q, [(item_text(it), item_documents(it)) for it in items],
                  [f"{kind_of(it)} {it['score']:.3f}" for it in items])
        cpu_ms[method] = round(1000 * (time.process_time() - spent) / len(questions), 1)

    children = list(Chunk.objects.filter(document__in=document_of.values(), level=Chunk.Level.CHILD)
                    .order_by("document", "ordinal").values_list("text", "document_id"))
    texts = [t for t, _ in children]
    bm25 = FlatBM25(texts)
    matrix = model.embed_documents(texts)
    for q in questions:
        top = bm25.top(q["question"], args.top_k)
        score("flat BM25 chunks", q, [(texts[i], {children[i][1]}) for i in top])
        top = dense_top(matrix, model.embed_query(q["question"]), args.top_k)
        score("flat dense chunks", q, [(texts[i], {children[i][1]}) for i in top])

    report = {
        "questions": len(questions),
        "cross_language": sum(1 for q in questions if q.get("cross_language")),
        "documents": len(document_of),
        "documents_failed": failed,
        "facts": facts,
        "child_chunks": len(children),
        "ingest_seconds": round(ingest_seconds, 1),
        "top_k": args.top_k,
        "memory_types": args.memory_types,
        "cpu_ms_per_query": cpu_ms,
        "methods": {name: {g: s.row() for g, s in table.items()} for name, table in results.items()},
    }
    if args.dump:
        Path(args.dump).write_text(json.dumps(dump, ensure_ascii=False, indent=1), encoding="utf-8")
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return
    print(f"docqa: {report['questions']} questions ({report['cross_language']} cross-language) over "
          f"{report['documents']} files, {facts} facts, {len(children)} child chunks; ingested in "
          f"{report['ingest_seconds']} s; failed: {failed or 'none'}")
    columns = ["first", f"ans@{WINDOW}", "MRR", "found"]
    names = list(report["methods"])
    group_names = ["all", "cross-language"] + sorted(g for g in next(iter(results.values())) if ":" in g)
    for group in group_names:
        rows = {name: report["methods"][name].get(group) for name in names}
        n = next((r["n"] for r in rows.values() if r), 0)
        print(f"\n{group} (n={n})")
        print(f"{'method':20}" + "".join(f"{c:>9}" for c in columns))
        for name, row in rows.items():
            if row:
                print(f"{name:20}" + "".join(f"{row[c]:>9}" for c in columns))


if __name__ == "__main__":
    sys.exit(main())
