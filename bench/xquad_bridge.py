"""The query bridge on XQuAD's held-out articles, through Loci's own hybrid search.

    SEARCH_QUERY_BRIDGE_DICTIONARY=… python -m bench.xquad_bridge [--var-dir D [--reuse]] [--top-k 10]

The 60 English and 60 Chinese passages of XQuAD's held-out articles (0, 4, 8, …, as bench.xquad_rerank;
CC BY-SA 4.0) are ingested one file each, English into one knowledge base and Chinese into another.
Each Chinese question is asked with hybrid search (facts, episodes and chunks), the bridge off and on
(SEARCH_QUERY_BRIDGE, weight and senses as configured), twice:
- zh>en: over the English base only; its passage is the English translation of its own;
- zh>zh (mixed): over both bases; its passage is its own, and the bridge's English words may now
  lift English passages over it (the same-language control).
English questions are not asked: the bridge never applies to them. An item answers when it comes
from the question's passage. Reported: first item, R@5, R@top-k (the merged order's `rank`), and the first item from the passage
or its translation (both answer: the mixed run's "first, either language").
"""

import argparse
import json
import logging
import os
import sys
import time

from bench.harness import setup_django
from bench.xquad_rerank import held_out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--var-dir")
    parser.add_argument("--reuse", action="store_true", help="with --var-dir: the passages a previous run ingested")
    parser.add_argument("--limit", type=int, default=0, help="ask only the first N Chinese questions (0: all)")
    parser.add_argument("--weights", default="", help="bridge weights to run beside off (default: the setting's)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("LLM_DISABLED", "1")
    var = setup_django(args.var_dir)
    logging.disable(logging.WARNING)

    from django.db import transaction
    from django.test import override_settings

    from bench.docqa import item_documents, merged_items
    from ingest.actions import ingest_document
    from memory.models import Document
    from retrieval.request import parse_search_request
    from retrieval.search import query_bridge, search
    from tenants.access import Scope
    from tenants.models import KnowledgeBase, Tenant

    passages, questions = held_out()
    tenant, _ = Tenant.objects.get_or_create(slug="xquad", defaults={"name": "xquad"})
    bases = {lang: KnowledgeBase.objects.get_or_create(tenant=tenant, slug=f"xquad-{lang}",
                                                       defaults={"name": f"xquad {lang}"})[0] for lang in passages}
    scope = Scope(tenant, frozenset(kb.pk for kb in bases.values()), True, True, "bench")
    workdir = var / "xquad-passages"
    workdir.mkdir(exist_ok=True)
    started = time.perf_counter()
    document_of: dict[tuple[str, int], int] = {}
    for lang, texts in passages.items():
        existing = dict(Document.objects.filter(kb=bases[lang], status="ready").values_list("filename", "pk")) \
            if args.reuse else {}
        for i, text in enumerate(texts):
            name = f"xquad-{lang}-{i:03d}.txt"
            if name in existing:
                document_of[lang, i] = existing[name]
                continue
            path = workdir / name
            path.write_text(text, encoding="utf-8")
            with path.open("rb") as fh, transaction.atomic():
                document_of[lang, i] = ingest_document(scope, bases[lang], fh, name).document.pk
    ingest_seconds = time.perf_counter() - started
    query_bridge.dictionary()  # outside the timing

    asked = questions["zh"][: args.limit or None]
    runs = {"zh>en": ("en", ["xquad-en"]), "zh>zh (mixed)": ("zh", ["xquad-en", "xquad-zh"])}
    report = {"questions": len(asked), "top_k": args.top_k, "ingest_seconds": round(ingest_seconds, 1),
              "weight": None, "senses": query_bridge.SENSES, "rows": {}, "ranks": {}}
    from django.conf import settings

    weights = [float(w) for w in args.weights.split(",")] if args.weights else [settings.SEARCH_QUERY_BRIDGE_WEIGHT]
    for bridge in [None, *weights]:
        with override_settings(SEARCH_QUERY_BRIDGE=bridge is not None, SEARCH_QUERY_BRIDGE_WEIGHT=bridge or 1.0):
            report["weight"] = weights
            for run, (gold_lang, kbs) in runs.items():
                ranks, either, spent = [], [], time.process_time()
                for question, index in asked:
                    response = search(scope, parse_search_request({
                        "query": question, "method": "hybrid", "top_k": args.top_k, "filters": {"kb": kbs},
                        "memory_types": ["episode", "atomic_fact", "chunk"]}))
                    gold = document_of[gold_lang, index]
                    parallel = {document_of[lang, index] for lang in passages}
                    items = merged_items(response)
                    ranks.append(next((n for n, it in enumerate(items, start=1) if gold in item_documents(it)), None))
                    either.append(next((n for n, it in enumerate(items, start=1) if parallel & item_documents(it)),
                                       None))
                name = f"{run} bridge {'off' if bridge is None else f'on, weight {bridge:g}'}"
                n = len(ranks)
                report["rows"][name] = {
                    "first": round(sum(r == 1 for r in ranks) / n, 3),
                    "R@5": round(sum(r is not None and r <= 5 for r in ranks) / n, 3),
                    f"R@{args.top_k}": round(sum(r is not None and r <= args.top_k for r in ranks) / n, 3),
                    # the mixed run: its passage or the passage's translation first (either answers)
                    "first, either language": round(sum(r == 1 for r in either) / n, 3),
                    "n": n, "cpu_ms": round(1000 * (time.process_time() - spent) / n, 1)}
                report["ranks"][name] = ranks
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=1))
        return 0
    print(f"xquad bridge: {report['questions']} Chinese questions, top_k {args.top_k}, weights {report['weight']}, "
          f"senses {report['senses']}; ingested in {report['ingest_seconds']} s")
    for name, row in report["rows"].items():
        print(f"{name:28}" + "  ".join(f"{k} {v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
