"""Cross-language questions: Chinese over English documents and English over Chinese ones.

    python -m bench.crosslang [--shifts 0,0.03,0.05] [--floor F]

A throwaway Loci holds four English files of shared/data/docs and the first twelve CMRC trial
passages (Chinese, one file each, named by title). Each question below is asked with every method
(facts, episodes and chunks, top_k 10) under each cross-language cosine shift
(SEARCH_CROSS_LANGUAGE_COSINE_SHIFT); an item answers when its text holds the answer and it comes
from the question's file. Reported: answer in the first item, rank of the first answering item
(the merged order, `rank`), and whether the query came back `weak`. Same-language questions on the
same files are the control: the shift must not cost them.
"""

import argparse
import json
import logging
import sys
from pathlib import Path

from bench.harness import SHARED_DATA, setup_django

ENGLISH = ["unstructured/book-war-and-peace-1p.txt", "unstructured/fake-text.txt", "unstructured/stanley-cups.csv",
           "unstructured/simple.odt"]
CMRC = SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json"
CMRC_PASSAGES = 12
# (question, answer string, file name, kind): kind "zh>en" / "en>zh" cross-language, "same" control.
QUESTIONS = [
    ("谁第一个来到安娜·帕夫洛夫娜的晚会？", "Vasili Kuragin", "book-war-and-peace-1p.txt", "zh>en"),
    ("安娜·帕夫洛夫娜是哪位皇后的侍女？", "Marya Fedorovna", "book-war-and-peace-1p.txt", "zh>en"),
    ("安娜·帕夫洛夫娜得了什么病？", "grippe", "book-war-and-peace-1p.txt", "zh>en"),
    ("安娜·帕夫洛夫娜的请柬是用什么语言写的？", "French", "book-war-and-peace-1p.txt", "zh>en"),
    ("多伦多枫叶队赢得过几次斯坦利杯？", "13", "stanley-cups.csv", "zh>en"),
    ("测试文件里写的地址在哪个城市？", "Doylestown", "fake-text.txt", "zh>en"),
    ("Where does the tammar wallaby live?", "澳洲南部岛屿", "尤金袋鼠.txt", "en>zh"),
    ("Who donated the land for Chatuchak Park?", "泰国国家铁路局", "乍都节公园.txt", "en>zh"),
    ("Which country is the politician Jean-Pierre Balligand from?", "法国", "让-皮埃尔·巴利冈.txt", "en>zh"),
    ("How many WTA singles titles did Flavia Pennetta win?", "10次", "弗拉维娅·佩内塔.txt", "en>zh"),
    ("Which comics company is Jaime Reyes a character of?", "DC漫画", "海梅·雷耶斯.txt", "en>zh"),
    ("How tall can the kahikatea tree grow?", "55米", "纽西兰鸡毛松.txt", "en>zh"),
    ("When was the men's 100 metres at the 2008 Summer Olympics held?", "8月15日",
     "2008年夏季奥林匹克运动会田径比赛－男子100米.txt", "en>zh"),
    ("Who was the first to arrive at Anna Pavlovna's reception?", "Vasili Kuragin", "book-war-and-peace-1p.txt",
     "same"),
    ("What illness was Anna Pavlovna suffering from?", "grippe", "book-war-and-peace-1p.txt", "same"),
    ("How many Stanley Cups have the Maple Leafs won?", "13", "stanley-cups.csv", "same"),
    ("尤金袋鼠分布在哪些地区？", "澳洲南部岛屿", "尤金袋鼠.txt", "same"),
    ("乍都节公园是由谁捐献土地建造出来的？", "泰国国家铁路局", "乍都节公园.txt", "same"),
    ("佩内塔获得过几次WTA赛事女子单打冠军？", "10次", "弗拉维娅·佩内塔.txt", "same"),
    ("纽西兰鸡毛松有多高？", "55米", "纽西兰鸡毛松.txt", "same"),
]


def item_text(item: dict) -> str:
    return item.get("atomic_fact") or item.get("summary") or item.get("text") or ""


def ingest_all(scope, kb, workdir: Path) -> None:
    from django.db import transaction

    from bench.cmrc import file_name, load
    from ingest.actions import ingest_document

    paths = [SHARED_DATA / "docs" / p for p in ENGLISH]
    for p in load(CMRC, CMRC_PASSAGES):
        path = workdir / file_name(p, "title")
        path.write_text(p["context"], encoding="utf-8")
        paths.append(path)
    for path in paths:
        with path.open("rb") as fh, transaction.atomic():
            ingest_document(scope, kb, fh, path.name)


def ask(scope, question: str, method: str) -> dict:
    from retrieval.request import parse_search_request
    from retrieval.search import search

    return search(scope, parse_search_request({"query": question, "method": method, "top_k": 10,
                                               "memory_types": ["episode", "atomic_fact", "chunk"]}))


def first_answering_rank(response: dict, answer: str, filename: str) -> int | None:
    items = sorted((it for key in ("facts", "episodes", "chunks") for it in response.get(key, [])),
                   key=lambda it: it["rank"])
    for it in items:
        texts = [item_text(it)] + [item_text(f) for f in it.get("atomic_facts", [])]
        names = {s.get("document_name") for s in it.get("sources", [])}
        if filename in names and any(answer in t for t in texts):
            return it["rank"]
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shifts", default="0,0.03,0.05")
    parser.add_argument("--floor", type=float, help="MRAG_MIN_RELEVANCE for the run (default: the setting)")
    parser.add_argument("--methods", default="hybrid,vector,keyword")
    parser.add_argument("--var-dir", help="reuse this data directory")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    var = setup_django(args.var_dir)
    logging.disable(logging.WARNING)
    from django.conf import settings

    from bench.harness import make_scope

    if args.floor is not None:
        settings.MRAG_MIN_RELEVANCE = args.floor
    scope, kb = make_scope("crosslang", "crosslang")
    workdir = var / "crosslang-docs"
    workdir.mkdir(exist_ok=True)
    ingest_all(scope, kb, workdir)
    report = {"floor": settings.MRAG_MIN_RELEVANCE, "runs": []}
    for shift in (float(s) for s in args.shifts.split(",")):
        settings.SEARCH_CROSS_LANGUAGE_COSINE_SHIFT = shift
        for method in args.methods.split(","):
            rows = []
            for question, answer, filename, kind in QUESTIONS:
                response = ask(scope, question, method)
                rows.append({"q": question, "kind": kind, "rank": first_answering_rank(response, answer, filename),
                             "weak": response["query"]["weak"]})
            summary = {}
            for kind in ("zh>en", "en>zh", "same"):
                part = [r for r in rows if r["kind"] == kind]
                summary[kind] = {"first": sum(r["rank"] == 1 for r in part), "in top 10": sum(r["rank"] is not None
                                 for r in part), "of": len(part), "weak": sum(r["weak"] for r in part)}
            report["runs"].append({"shift": shift, "method": method, "summary": summary, "rows": rows})
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=1))
        return 0
    print(f"floor {report['floor']}")
    for run in report["runs"]:
        s = run["summary"]
        print(f"shift {run['shift']:<5} {run['method']:8} " + "  ".join(
            f"{k}: first {v['first']}/{v['of']}, top10 {v['in top 10']}, weak {v['weak']}" for k, v in s.items()))
        print("    ranks: " + " ".join(str(r["rank"]) for r in run["rows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
