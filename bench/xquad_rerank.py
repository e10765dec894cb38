"""The multilingual reranker's own check: XQuAD's held-out articles, cross-language, side by side.

    python -m bench.xquad_rerank [--depth 20] [--precision int8] [--json]

XQuAD articles 0, 4, 8, ... (12 of 48, 60 passages; bench/train_reranker.py never trains on them).
Per direction (Chinese question -> English passage, English -> Chinese, Chinese -> Chinese), Loci's
default embedder (e5-small-onnx) ranks the 60 passages of the direction's language; then e5x-rerank
rescores its top `depth`. Reported: R@1 and R@5 with the stage off and on, and the reranker's
CPU-ms per query (process CPU time, so a loaded machine does not inflate it).
"""

import argparse
import json
import sys

import numpy as np

from bench.harness import SHARED_DATA, cpu_seconds

HOLDOUT_EVERY = 4



def held_out():
    data = {lang: json.loads((SHARED_DATA / "train" / "xquad" / f"xquad.{lang}.json").read_text())["data"]
            for lang in ("en", "zh")}
    passages = {lang: [] for lang in data}
    questions = {lang: [] for lang in data}  # (question, index of its passage)
    for article in range(0, len(data["en"]), HOLDOUT_EVERY):
        for lang in data:
            for paragraph in data[lang][article]["paragraphs"]:
                questions[lang] += [(qa["question"], len(passages[lang])) for qa in paragraph["qas"]]
                passages[lang].append(paragraph["context"])
    return passages, questions


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--precision", default="int8", choices=("int8", "fp32"))
    parser.add_argument("--directions", default="zh>en,en>zh,zh>zh")
    parser.add_argument("--weights", default=None, help="trained weights (default: the committed file)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    import tempfile

    from django.conf import settings

    from bench.harness import setup_django

    setup_django(tempfile.mkdtemp(prefix="loci-xquad-"))
    from retrieval.runtimes.e5_rerank import E5CrossReranker
    from retrieval.embeddings.e5_onnx import E5SmallOnnxEmbedder

    embedder = E5SmallOnnxEmbedder(var_dir=settings.VAR_DIR, models_dir=settings.LOCI_MODELS_DIR)
    reranker = E5CrossReranker(models_dir=settings.LOCI_MODELS_DIR, precision=args.precision, weights=args.weights)
    reranker.rerank("warm", ["up"])  # build/load the model outside the timing
    passages, questions = held_out()
    vectors = {lang: embedder.embed_documents(texts) for lang, texts in passages.items()}
    rows = {}
    for direction in args.directions.split(","):
        q_lang, p_lang = direction.split(">")
        off1 = off5 = on1 = on5 = 0
        spent = 0.0
        for question, gold in questions[q_lang]:
            query_vector = embedder.embed_query(question)
            order = list(np.argsort(-(vectors[p_lang] @ query_vector), kind="stable"))
            top = order[: args.depth]
            started = cpu_seconds()
            # The index's vectors, as a search hands them over (the score is residual on their cosine).
            scores = reranker.rerank(question, [passages[p_lang][i] for i in top], query_vector=query_vector,
                                     vectors=vectors[p_lang][top])
            spent += cpu_seconds() - started
            reranked = [top[i] for i in np.argsort(-np.asarray(scores), kind="stable")] + order[args.depth:]
            off1 += order[0] == gold
            off5 += gold in order[:5]
            on1 += reranked[0] == gold
            on5 += gold in reranked[:5]
        n = len(questions[q_lang])
        rows[direction] = {"questions": n, "passages": len(passages[p_lang]),
                           "R@1 off": round(off1 / n, 3), "R@1 on": round(on1 / n, 3),
                           "R@5 off": round(off5 / n, 3), "R@5 on": round(on5 / n, 3),
                           "rerank CPU-ms/query": round(1000 * spent / n, 1)}
    if args.json:
        json.dump({"depth": args.depth, "precision": args.precision, "model": reranker.name, "rows": rows},
                  sys.stdout, indent=1)
        return
    print(f"{reranker.name}, e5-small-onnx top {args.depth} reranked")
    print(f"{'direction':10} {'n':>4} {'R@1 off':>8} {'R@1 on':>7} {'R@5 off':>8} {'R@5 on':>7} {'CPU-ms/q':>9}")
    for direction, row in rows.items():
        print(f"{direction:10} {row['questions']:>4} {row['R@1 off']:>8} {row['R@1 on']:>7} {row['R@5 off']:>8} "
              f"{row['R@5 on']:>7} {row['rerank CPU-ms/query']:>9}")


if __name__ == "__main__":
    main()
