"""Fit the logistic fusion weights (MRAG_LR_* for episodes, MRAG_FACT_* for facts) on CMRC 2018.

    python -m bench.cmrc --var-dir var-cmrc --methods hybrid     # ingest once, keep the data
    python -m bench.fit_fusion --var-dir var-cmrc                # fit, print the settings to use

For every question, the candidates hybrid search would see are read from the engines once: the
recalled episodes and every fact of theirs, with cosine and BM25. A fact is relevant when it is in
the gold passage and holds a gold answer; an episode when it is the gold passage's.

1. Direction: a listwise logistic model (softmax over each question's facts) on the fact's and its
   episode's cosine and BM25, fitted on the even-numbered questions. Its fact part gives the facts'
   cosine:BM25 ratio, its episode part the episodes'.
2. Scale and bias: a grid over how steep each sigmoid is and where it is centred, scored by running
   the real mRAG expander (retrieval.search.mrag) offline and measuring answer@200 characters.
3. The best point on the even questions is reported with its score on the odd ones (held out).

The weights are the embedder's: refit after changing EMBEDDING_BACKEND (cosine ranges differ).
"""

import argparse
import itertools
import logging
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.cmrc import DEFAULT_PATH, file_name, load
from bench.harness import make_scope, setup_django

SCALES = (0.1, 0.2, 0.4)
SHIFTS = (0.0, 2.0, 4.0)
WINDOW = 200


def candidates(passages) -> list[dict]:
    """Per question: episodes [(id, cos, bm25, rrf)], facts [(id, parent, cos, bm25)], texts, labels."""
    from memory.models import Document, Memory
    from retrieval.backends.base import IndexFilter
    from retrieval.request import parse_search_request
    from retrieval.search.engines import Engines
    from retrieval.search.hybrid import ALL_ABOVE_FLOOR, episodes_of_facts, fuse

    scope, kb = make_scope("cmrc", "cmrc")
    by_name = {d.filename: d.pk for d in Document.objects.filter(kb=kb, status="ready")}
    # Files named by title or by passage id (`bench.cmrc --name-by`).
    doc_of = {p["id"]: by_name.get(file_name(p, "title")) or by_name.get(file_name(p, "id")) for p in passages}
    doc_of = {k: v for k, v in doc_of.items() if v}
    memories = {f"memory:{m['id']}": m for m in Memory.objects.filter(kb=kb).values("id", "text", "document_id")}
    base = IndexFilter(tenant_id=scope.tenant.pk, kb_ids=(kb.pk,))
    out = []
    for p in passages:
        for qa in (qa for qa in p["qas"] if qa["question"].strip() and p["id"] in doc_of):
            engines = Engines(parse_search_request({"query": qa["question"], "top_k": 10}).query)
            episodes = fuse(engines, replace(base, kinds=("episode",)), 20)
            episodes += episodes_of_facts(engines, base, episodes, *engines.both(replace(base, kinds=("atomic_fact",)), 20))
            flt = replace(base, kinds=("atomic_fact",), parent_ids=tuple(e.id for e in episodes))
            bm25 = {h.id: h.score for h in engines.bm25(flt, ALL_ABOVE_FLOOR)}
            facts = [(h.id, h.extra.get("parent_id"), h.score, bm25.get(h.id, 0.0))
                     for h in engines.dense(flt, ALL_ABOVE_FLOOR, floor=-1.0)]
            answers = [a["text"] for a in qa["answers"] if a["text"]]
            gold = doc_of[p["id"]]
            out.append({
                "episodes": [(e.id, e.scores["cosine"], e.scores["bm25"], e.scores["rrf"]) for e in episodes],
                "facts": facts, "answers": answers,
                "text": {i: memories[i]["text"] for i in [e.id for e in episodes] + [f[0] for f in facts]},
                "relevant": {f[0] for f in facts if memories[f[0]]["document_id"] == gold
                             and any(a in memories[f[0]]["text"] for a in answers)},
            })
    return out


def listwise_direction(questions: list[dict], iterations: int = 300) -> np.ndarray:
    """Weights of [fact cos, fact bm25, episode cos, episode bm25] maximising each answer fact's softmax share."""
    groups = []
    for q in questions:
        episode = {e[0]: e[1:3] for e in q["episodes"]}
        x = np.array([[c, b, *episode[p]] for _, p, c, b in q["facts"]])
        y = np.array([f[0] in q["relevant"] for f in q["facts"]], dtype=float)
        if y.sum():
            groups.append((x, y / y.sum()))
    stacked = np.vstack([x for x, _ in groups])
    mu, sd = stacked.mean(0), stacked.std(0) + 1e-9
    w, m, v = np.zeros(4), np.zeros(4), np.zeros(4)
    for t in range(1, iterations + 1):  # Adam on the mean listwise cross-entropy
        g = np.zeros(4)
        for x, target in groups:
            z = ((x - mu) / sd) @ w
            p = np.exp(z - z.max())
            g += ((x - mu) / sd).T @ (p / p.sum() - target)
        g /= len(groups)
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        w -= 0.05 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w / sd


def answer_at(questions: list[dict], fact_w, episode_w, alpha: float, competing: int) -> float:
    """answer@WINDOW of the real expander with these weights (fact and episode: w_cos, w_bm25, bias)."""
    from retrieval.search.scoring import logistic_relevance
    from retrieval.search.mrag import Candidate, EpisodeExpander, MragParams

    found = 0
    for q in questions:
        episodes = sorted((Candidate(i, "episode", logistic_relevance(c, b, *episode_w), scores={"rrf": r})
                           for i, c, b, r in q["episodes"]), key=lambda e: e.scores["rrf"], reverse=True)
        table: dict[str, list] = {}
        for i, parent, c, b in q["facts"]:
            table.setdefault(parent, []).append(Candidate(i, "atomic_fact", logistic_relevance(c, b, *fact_w), parent))
        params = MragParams(top_n=10, alpha=alpha, facts_competing=competing)
        ranked = EpisodeExpander(params, lambda ids: {e: table.get(e, []) for e in ids}).run(episodes)
        context = "".join(q["text"][c.id] for c in ranked)
        found += any(a in context[:WINDOW] for a in q["answers"])
    return found / max(1, len(questions))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", nargs="?", default=str(DEFAULT_PATH))
    parser.add_argument("--var-dir", required=True, help="a data directory `bench.cmrc --var-dir` filled")
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--competing", type=int, default=6)
    args = parser.parse_args(argv)
    setup_django(args.var_dir)
    logging.disable(logging.WARNING)
    questions = candidates(load(Path(args.path), None))
    train, test = questions[0::2], questions[1::2]
    direction = listwise_direction(train)
    fact_dir, episode_dir = direction[:2], direction[2:]
    fact_cos = np.median([f[2] for q in train for f in q["facts"]])
    episode_cos = np.median([e[1] for q in train for e in q["episodes"]])

    def weights(d, scale, shift, centre):  # centred so the median cosine with no BM25 match sits at -shift
        return (d[0] * scale, d[1] * scale, -d[0] * scale * centre - shift)

    best = None
    for fs, fshift, es, eshift in itertools.product(SCALES, SHIFTS, SCALES, SHIFTS):
        fw, ew = weights(fact_dir, fs, fshift, fact_cos), weights(episode_dir, es, eshift, episode_cos)
        score = answer_at(train, fw, ew, args.alpha, args.competing)
        if best is None or score > best[0]:
            best = (score, fw, ew)
    score, fw, ew = best
    print(f"{len(questions)} questions; listwise direction fact {np.round(fact_dir, 3)}, episode {np.round(episode_dir, 3)}")
    print(f"answer@{WINDOW}: {score:.3f} on the fitting half, {answer_at(test, fw, ew, args.alpha, args.competing):.3f} "
          f"held out (alpha={args.alpha}, facts competing={args.competing})")
    print(f"MRAG_FACT_W_COS={fw[0]:.4g} MRAG_FACT_W_BM25={fw[1]:.4g} MRAG_FACT_BIAS={fw[2]:.4g}")
    print(f"MRAG_LR_W_COS={ew[0]:.4g} MRAG_LR_W_BM25={ew[1]:.4g} MRAG_LR_BIAS={ew[2]:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
