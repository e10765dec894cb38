"""CMRC 2018 retrieval quality: each passage a document, each question a search.

    python -m bench.cmrc [PATH] [--limit-passages N] [--json] [--name-by title|id]

Reports, for keyword, vector and hybrid in one run, passage recall@1/5/10 and MRR (the gold passage
recovered through each result's sources) and answer@N characters: whether a gold answer string
appears in the first N = 100/200/400 characters of the returned context (results concatenated in
rank order, facts as their text, episodes as their summary, chunks as theirs). Beside them, flat
baselines over the same data: BM25 over whole passages and BM25 over sentences.
"""

import argparse
import json
import logging
import re
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import SHARED_DATA, percentile, setup_django

DEFAULT_PATH = SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json"
WINDOWS = (100, 200, 400)
KS = (1, 5, 10)
_SENTENCE = re.compile(r"(?<=[。！？!?；;])")


def load(path: Path, limit: int | None):
    """The passages, each with its article's title (a CMRC passage often leaves its subject to it)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    passages = [{**p, "title": article.get("title") or ""} for article in data["data"] for p in article["paragraphs"]]
    return passages[:limit] if limit else passages


def file_name(passage: dict, name_by: str) -> str:
    """`title`: the article's title, as a saved Wikipedia page is named; `id`: the passage id (TRIAL_800)."""
    stem = passage["title"] if name_by == "title" and passage["title"] else passage["id"]
    return re.sub(r'[\\/:*?"<>|\x00-\x1f]', "_", stem)[:120] + ".txt"


def ranked_items(response: dict) -> list[dict]:
    """Every hit of a response in one rank order, by score.

    mRAG's facts and episodes come from one sorted top-N; in flat methods, fact hits are nested
    under their episode (an episode added only to hold a fact hit is context, not a hit).
    """
    flat = not response["facts"]
    items = [e for e in response["episodes"] if not e["scores"].get("via_fact")]
    if flat:
        items += [f for e in response["episodes"] for f in e.get("atomic_facts", [])]
    items += response["facts"] + response.get("chunks", [])
    return sorted(items, key=lambda it: it["score"], reverse=True)


def item_text(item: dict) -> str:
    return item.get("atomic_fact") or item.get("summary") or item.get("text") or ""


def item_documents(item: dict) -> list[int]:
    return [s["document_id"] for s in item.get("sources", []) if s.get("document_id")]


class Scores:
    def __init__(self):
        self.recall = {k: 0 for k in KS}
        self.mrr = 0.0
        self.answer = {n: 0 for n in WINDOWS}
        self.n = 0
        self.latency: list[float] = []
        self.cpu: list[float] = []  # process CPU per search (every thread of it), ms

    def add(self, ranked_docs: list, context: str, gold_doc, answers: list[str]):
        self.n += 1
        seen = list(dict.fromkeys(ranked_docs))
        for k in KS:
            self.recall[k] += gold_doc in seen[:k]
        if gold_doc in seen:
            self.mrr += 1 / (seen.index(gold_doc) + 1)
        for n in WINDOWS:
            self.answer[n] += any(a and a in context[:n] for a in answers)

    def row(self) -> dict:
        n = max(1, self.n)
        row = {f"R@{k}": round(self.recall[k] / n, 3) for k in KS}
        row["MRR"] = round(self.mrr / n, 3)
        row.update({f"ans@{w}": round(self.answer[w] / n, 3) for w in WINDOWS})
        if self.latency:
            row["p50 ms"] = round(percentile(self.latency, 50), 1)
            row["p95 ms"] = round(percentile(self.latency, 95), 1)
        if self.cpu:
            row["CPU ms/q"] = round(sum(self.cpu) / len(self.cpu), 1)
        return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", nargs="?", default=str(DEFAULT_PATH))
    parser.add_argument("--limit-passages", type=int, default=None)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--methods", default="keyword,vector,hybrid")
    parser.add_argument("--var-dir", help="reuse this data directory (documents already there are duplicates)")
    parser.add_argument("--reuse", action="store_true", help="with --var-dir: ask the documents a previous run ingested")
    parser.add_argument("--name-by", choices=("title", "id"), default="title",
                        help="name each passage's file by its article title (default) or by its passage id")
    args = parser.parse_args(argv)
    passages = load(Path(args.path), args.limit_passages)
    setup_django(args.var_dir)
    logging.disable(logging.WARNING)


    from django.conf import settings

    from bench.flat import FlatBM25
    from bench.harness import make_scope
    from ingest.actions import ingest_document
    from memory.models import Document
    from retrieval.request import parse_search_request
    from retrieval.search import search

    scope, kb = make_scope("cmrc", "cmrc")
    workdir = Path(tempfile.mkdtemp(prefix="cmrc-docs-"))
    started = time.perf_counter()
    doc_of_passage = {}
    # --reuse: a var dir a previous run filled answers again without ingesting (names are unique per passage).
    existing = {}
    if args.reuse:
        for pk, filename in Document.objects.filter(kb=kb, status="ready").order_by("pk").values_list("pk", "filename"):
            existing.setdefault(filename, pk)
    for i, p in enumerate(passages):
        if file_name(p, args.name_by) in existing:
            doc_of_passage[i] = existing[file_name(p, args.name_by)]
            continue
        path = workdir / str(i) / file_name(p, args.name_by)
        path.parent.mkdir()
        path.write_text(p["context"], encoding="utf-8")
        with path.open("rb") as fh:
            doc_of_passage[i] = ingest_document(scope, kb, fh, path.name).document.pk
    ingest_seconds = time.perf_counter() - started
    failed = Document.objects.filter(status="failed").count()

    questions = [(i, qa) for i, p in enumerate(passages) for qa in p["qas"] if qa["question"].strip()]
    results = {m: Scores() for m in args.methods.split(",")}
    if any(m.endswith("+ml") for m in results):  # build/load the reranker outside the timing
        from retrieval.search import multilingual

        multilingual.model().rerank("warm", ["up"])
    for method in results:
        for i, qa in questions:
            answers = [a["text"] for a in qa["answers"]]
            t0, c0 = time.perf_counter(), time.process_time()
            # "hybrid+rerank": the same method with the rerank stage asked for (RERANK_* / RERANK_MULTILINGUAL).
            # "hybrid+ml": the multilingual rescoring stage on (SEARCH_MULTILINGUAL_RERANK) for this method only.
            base, _, stage = method.partition("+")
            settings.SEARCH_MULTILINGUAL_RERANK = stage == "ml"
            response = search(scope, parse_search_request({"query": qa["question"], "method": base,
                                                          "top_k": args.top_k, "rerank": stage == "rerank"}))
            results[method].latency.append((time.perf_counter() - t0) * 1000)
            results[method].cpu.append((time.process_time() - c0) * 1000)
            items = ranked_items(response)
            ranked_docs = [d for it in items for d in item_documents(it)]
            context = "".join(item_text(it) for it in items)
            results[method].add(ranked_docs, context, doc_of_passage[i], answers)

    flat_passages = FlatBM25([p["context"] for p in passages])
    sentences, sentence_passage = [], []
    for i, p in enumerate(passages):
        for s in (s.strip() for s in _SENTENCE.split(p["context"])):
            if s:
                sentences.append(s)
                sentence_passage.append(i)
    flat_sentences = FlatBM25(sentences)
    baselines = {"flat BM25 passages": Scores(), "flat BM25 sentences": Scores()}
    for i, qa in questions:
        answers = [a["text"] for a in qa["answers"]]
        top = flat_passages.top(qa["question"], args.top_k)
        baselines["flat BM25 passages"].add(top, "".join(passages[j]["context"] for j in top), i, answers)
        top = flat_sentences.top(qa["question"], args.top_k)
        baselines["flat BM25 sentences"].add([sentence_passage[j] for j in top], "".join(sentences[j] for j in top),
                                             i, answers)
    report = {
        "passages": len(passages),
        "files named by": args.name_by,
        "questions": len(questions),
        "documents_failed": failed,
        "ingest_seconds": round(ingest_seconds, 1),
        "methods": {m: s.row() for m, s in results.items()},
        "baselines": {m: s.row() for m, s in baselines.items()},
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return
    print(f"CMRC: {report['passages']} passages, {report['questions']} questions, "
          f"ingested in {report['ingest_seconds']} s ({failed} failed)")
    columns = [f"R@{k}" for k in KS] + ["MRR"] + [f"ans@{w}" for w in WINDOWS] + ["p50 ms", "p95 ms"]
    print(f"{'method':24}" + "".join(f"{c:>9}" for c in columns))
    for name, row in {**report["methods"], **report["baselines"]}.items():
        print(f"{name:24}" + "".join(f"{row.get(c, ''):>9}" for c in columns))


if __name__ == "__main__":
    sys.exit(main())
