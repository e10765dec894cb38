"""Flat retrieval quality and speed of the bundled embedders (e5-small, USE) against BM25, on real data.

    .venv/bin/python -m bench.embedders                  # LoCoMo conv 0-1, 300 CMRC questions, throughput
    .venv/bin/python -m bench.embedders --cmrc-questions 1002 --conversations 0 1 2 3 4 5

(a) LoCoMo (../shared/data/locomo/locomo10_dev.json): every raw turn of a conversation is a document;
    each question of categories 1-4 searches its own conversation; evidence recall@10 =
    |top-10 ∩ evidence| / |evidence|, averaged over questions (the official evaluation's definition).
(b) CMRC 2018 trial (../shared/data/zh/cmrc2018/): the 256 passages are the documents, questions
    the queries; passage recall@1/@5 = share of questions whose own passage is in the top 1/5.
(c) Throughput: documents per second for short turns and for ~200-token passages, and load time.
No memories, no fusion, no reranking: this isolates the first-stage retrievers.
"""

import argparse
import json
import logging
import math
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("LOCI_SHARED_DATA", ROOT.parent / "shared" / "data"))
LOCOMO = DATA / "locomo" / "locomo10_dev.json"
CMRC = DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json"
_DIA_ID = re.compile(r"^D\d+:\d+$")

# Okapi BM25 with Lucene's defaults (k1=1.2, b=0.75) and its non-negative idf, log(1 + (N-df+.5)/(df+.5))
# (Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25 and Beyond").
BM25_K1 = 1.2
BM25_B = 0.75


def _fallback_tokenize(text: str) -> list[str]:
    import jieba

    # jieba's search mode also emits the sub-words of long words; single characters carry little
    # signal in Chinese and are mostly stop words in English, so they are dropped (digits kept).
    return [t for t in (w.strip().lower() for w in jieba.cut_for_search(text)) if re.fullmatch(r"\w+", t) and (len(t) > 1 or t.isdigit())]


def tokenizer():
    """retrieval.text.tokenize when the project has it, else the same recipe written out here."""
    try:
        from retrieval.text import tokenize

        return tokenize, "retrieval.text.tokenize"
    except ImportError:
        return _fallback_tokenize, "jieba cut_for_search (bench fallback)"


class BM25:
    """A small Okapi BM25 over pre-tokenised documents; only the rank order is used."""

    def __init__(self, docs: list[list[str]]):
        self.docs = [Counter(d) for d in docs]
        self.lengths = np.array([len(d) for d in docs], dtype=np.float64)
        self.avgdl = float(self.lengths.mean()) if len(docs) else 0.0
        df = Counter(term for d in self.docs for term in d)
        n = len(docs)
        self.idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}

    def scores(self, query: list[str]) -> np.ndarray:
        out = np.zeros(len(self.docs))
        norm = BM25_K1 * (1 - BM25_B + BM25_B * self.lengths / (self.avgdl or 1))
        for term in set(query):
            idf = self.idf.get(term)
            if idf is None:
                continue
            tf = np.array([d.get(term, 0) for d in self.docs], dtype=np.float64)
            out += idf * tf * (BM25_K1 + 1) / (tf + norm)
        return out


def top_k(scores: np.ndarray, k: int) -> list[int]:
    # Stable sort: ties keep document order, so BM25's many zero scores rank deterministically.
    return list(np.argsort(-scores, kind="stable")[:k])


def load_locomo(conversations: list[int]) -> list[dict]:
    data = json.loads(LOCOMO.read_text())
    out = []
    for ci in conversations:
        conv = data[ci]["conversation"]
        turns = []
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
            for turn in conv[key]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                turns.append((turn["dia_id"], text))
        questions = []
        for qa in data[ci]["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            evidence = {e for raw in qa.get("evidence", []) for e in re.split(r"[;\s]+", raw) if _DIA_ID.match(e)}
            if evidence:
                questions.append((qa["question"], evidence))
        out.append({"turns": turns, "questions": questions})
    return out


def load_cmrc(limit: int) -> tuple[list[str], list[tuple[str, int]]]:
    data = json.loads(CMRC.read_text())
    passages, questions = [], []
    for article in data["data"]:
        for para in article["paragraphs"]:
            passages.append(para["context"])
            questions += [(qa["question"], len(passages) - 1) for qa in para["qas"]]
    if limit < len(questions):
        step = len(questions) / limit  # evenly spread over the articles rather than the first few
        questions = [questions[int(i * step)] for i in range(limit)]
    return passages, questions


def locomo_recall(convs: list[dict], search) -> float:
    recalls = []
    for conv in convs:
        ids = [dia for dia, _ in conv["turns"]]
        ranker = search([text for _, text in conv["turns"]])
        for question, evidence in conv["questions"]:
            found = {ids[i] for i in ranker(question, 10)}
            recalls.append(len(found & evidence) / len(evidence))
    return float(np.mean(recalls))


def cmrc_recall(passages: list[str], questions: list[tuple[str, int]], search) -> tuple[float, float]:
    ranker = search(passages)
    at1 = at5 = 0
    for question, gold in questions:
        ranked = ranker(question, 5)
        at1 += ranked[:1] == [gold]
        at5 += gold in ranked
    return at1 / len(questions), at5 / len(questions)


def dense_search(model):
    def index(docs: list[str]):
        matrix = model.embed_documents(docs)
        return lambda query, k: top_k(matrix @ model.embed_query(query), k)

    return index


def bm25_search(tokenize):
    def index(docs: list[str]):
        bm25 = BM25([tokenize(d) for d in docs])
        return lambda query, k: top_k(bm25.scores(tokenize(query)), k)

    return index


def throughput(model, texts: list[str]) -> float:
    started = time.perf_counter()
    model.embed_documents(texts)
    return len(texts) / (time.perf_counter() - started)


def long_passages(turns: list[str], count: int, e5) -> list[str]:
    """~200-token English passages made of consecutive turns (measured with e5's tokenizer)."""
    out, current = [], []
    for turn in turns:
        current.append(turn)
        if e5.token_count(" ".join(current)) >= 200:
            out.append(" ".join(current))
            current = []
            if len(out) == count:
                break
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--cmrc-questions", type=int, default=300)
    parser.add_argument("--speed-texts", type=int, default=256)
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = parser.parse_args(argv)
    logging.getLogger("jieba").setLevel(logging.WARNING)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loci.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import jieba

    jieba.setLogLevel(logging.WARNING)
    from retrieval.embeddings.e5 import E5SmallEmbedder, load_e5
    from retrieval.embeddings.use import UseEmbedder, load_use

    tokenize, tokenizer_name = tokenizer()
    convs = load_locomo(args.conversations)
    passages, questions = load_cmrc(args.cmrc_questions)
    short = [t for c in convs for _, t in c["turns"]][: args.speed_texts]

    results: dict[str, dict] = {}
    loaders = {"e5-small": (E5SmallEmbedder, load_e5), "USE": (UseEmbedder, load_use)}
    for label, (cls, loader) in loaders.items():
        model = cls()
        started = time.perf_counter()
        loader()
        model.embed_query("warm up")
        row = {"load_s": time.perf_counter() - started}
        row["short_per_s"] = throughput(model, short)
        e5_for_tokens = E5SmallEmbedder()
        row["long_per_s"] = throughput(model, long_passages([t for c in convs for _, t in c["turns"]], 64, e5_for_tokens))
        row["cmrc_per_s"] = throughput(model, passages[:64])
        started = time.perf_counter()
        row["locomo_r10"] = locomo_recall(convs, dense_search(model))
        row["cmrc_r1"], row["cmrc_r5"] = cmrc_recall(passages, questions, dense_search(model))
        row["eval_s"] = time.perf_counter() - started
        results[label] = row
    started = time.perf_counter()
    bm25 = {"locomo_r10": locomo_recall(convs, bm25_search(tokenize))}
    bm25["cmrc_r1"], bm25["cmrc_r5"] = cmrc_recall(passages, questions, bm25_search(tokenize))
    bm25["eval_s"] = time.perf_counter() - started
    results["BM25"] = bm25

    n_questions = sum(len(c["questions"]) for c in convs)
    print(f"LoCoMo conversations {args.conversations}: {sum(len(c['turns']) for c in convs)} turns, {n_questions} questions (cat 1-4)")
    print(f"CMRC trial: {len(passages)} passages, {len(questions)} questions; BM25 tokenizer: {tokenizer_name}")
    print(f"threads: {os.cpu_count()} cores visible; throughput = documents/s, batch 64\n")
    header = f"{'retriever':<10} {'LoCoMo R@10':>11} {'CMRC R@1':>9} {'CMRC R@5':>9} {'load s':>7} {'turns/s':>8} {'200-tok/s':>9} {'CMRC psg/s':>10}"
    print(header)
    print("-" * len(header))
    for label, r in results.items():
        speed = (
            f"{r['load_s']:>7.2f} {r['short_per_s']:>8.0f} {r['long_per_s']:>9.1f} {r['cmrc_per_s']:>10.1f}"
            if "load_s" in r else f"{'-':>7} {'-':>8} {'-':>9} {'-':>10}"
        )
        print(f"{label:<10} {r['locomo_r10']:>11.3f} {r['cmrc_r1']:>9.3f} {r['cmrc_r5']:>9.3f} {speed}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
