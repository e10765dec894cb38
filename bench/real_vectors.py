"""Real e5 vectors of many distinct sentences, for recall measurements of approximate vector indexes.

    nice -n 10 python -m bench.real_vectors [--out /tmp/loci-vector-real] [--limit 100000]

Sentences: LoCoMo turns, LongMemEval turns (long ones cut at sentence ends into ~300-character
pieces), CMRC and DRCD passages and XQuAD paragraphs split into sentences, MemoryBank-CN lines;
deduplicated. Embedded as documents with the configured embedder (e5-small-onnx), in chunks that
are saved as they finish (`chunk-NNNN.npy` + `texts.json`), so a stopped run resumes; `load()`
returns (texts, matrix) of what is done. Also real questions embedded as queries (`queries.npy`).
"""

import argparse
import json
import re
import time
from pathlib import Path

import numpy as np

from bench.harness import SHARED_DATA

CHUNK = 2000
_SPLIT = re.compile(r"(?<=[。！？!?.])\s*")


def _pieces(text: str, size: int = 300) -> list[str]:
    out, cur = [], ""
    for s in _SPLIT.split(text):
        if len(cur) + len(s) > size and cur:
            out.append(cur.strip())
            cur = ""
        cur += (" " if cur and s[:1].isascii() else "") + s
    if cur.strip():
        out.append(cur.strip())
    return [p for p in out if len(p) > 8]


def sentences() -> list[str]:
    out: list[str] = []
    for conv in json.loads((SHARED_DATA / "locomo" / "locomo10_dev.json").read_text()):
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                out += [f"{t['speaker']}: {t['text']}" for t in turns]
    for path in sorted((SHARED_DATA / "longmemeval_s_dev").glob("*.json")):
        for session in json.loads(path.read_text())["haystack_sessions"]:
            for turn in session:
                out += [f"{turn['role']}: {p}" for p in _pieces(turn["content"])]
    squads = [
        SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json",
        SHARED_DATA / "train" / "drcd" / "DRCD_dev.json",
        SHARED_DATA / "train" / "drcd" / "DRCD_test.json",
        SHARED_DATA / "train" / "xquad" / "xquad.en.json",
        SHARED_DATA / "train" / "xquad" / "xquad.zh.json",
    ]
    for path in squads:
        for article in json.loads(path.read_text())["data"]:
            for p in article["paragraphs"]:
                out += _pieces(p["context"], 120)
    for path in sorted((SHARED_DATA / "zh" / "memorybank_cn").rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        stack = [data]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack += list(item.values())
            elif isinstance(item, list):
                stack += item
            elif isinstance(item, str) and len(item) > 8:
                out.append(item)
    seen, unique = set(), []
    for s in out:
        s = s.strip()
        if s and s not in seen:
            seen.add(s)
            unique.append(s)
    return unique


def questions() -> list[str]:
    locomo = json.loads((SHARED_DATA / "locomo" / "locomo10_dev.json").read_text())
    qs = [qa["question"] for conv in locomo for qa in conv["qa"]]
    for path in sorted((SHARED_DATA / "longmemeval_s_dev").glob("*.json")):
        qs.append(json.loads(path.read_text())["question"])
    for path in (
        SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json",
        SHARED_DATA / "train" / "drcd" / "DRCD_dev.json",
    ):
        qs += [qa["question"] for a in json.loads(path.read_text())["data"] for p in a["paragraphs"] for qa in p["qas"]]
    return [q for q in dict.fromkeys(qs) if q.strip()]


def load(out: Path) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """(texts, their vectors, the questions' vectors) of the chunks done so far (any of them)."""
    texts = json.loads((out / "texts.json").read_text())
    chunks = sorted(out.glob("chunk-*.npy"))
    done = [int(c.stem.split("-")[1]) for c in chunks]
    matrix = np.concatenate([np.load(c) for c in chunks]) if chunks else np.zeros((0, 384), np.float32)
    queries = np.load(out / "queries.npy") if (out / "queries.npy").exists() else None
    return [t for i in done for t in texts[i * CHUNK : (i + 1) * CHUNK]], matrix, queries


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="/tmp/loci-vector-real")
    parser.add_argument("--limit", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--reverse", action="store_true", help="last chunk first (a second worker)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from bench.harness import setup_django

    setup_django()
    from retrieval.embeddings import embedder

    if (out / "texts.json").exists():
        texts = json.loads((out / "texts.json").read_text())
    else:
        texts = sentences()
        np.random.default_rng(11).shuffle(texts)  # a mix of sources in every prefix of the file
        texts = texts[: args.limit]
        (out / "texts.json").write_text(json.dumps(texts, ensure_ascii=False))
    print(f"{len(texts)} texts", flush=True)
    if not (out / "queries.npy").exists():
        qs = questions()
        qs = [qs[i] for i in np.random.default_rng(12).permutation(len(qs))[: args.queries]]
        (out / "queries.json").write_text(json.dumps(qs, ensure_ascii=False))
        np.save(out / "queries.npy", np.stack([np.asarray(embedder().embed_query(q), np.float32) for q in qs]))
    starts = list(range(0, len(texts), CHUNK))
    for start in reversed(starts) if args.reverse else starts:
        path = out / f"chunk-{start // CHUNK:04d}.npy"
        if path.exists() or (out / f"{path.name}.taken").exists():
            continue
        (out / f"{path.name}.taken").touch()  # the other worker skips it
        t0 = time.process_time()
        matrix = np.asarray(embedder().embed_documents(texts[start : start + CHUNK]), dtype=np.float32)
        np.save(out / f"tmp-{path.name}", matrix)
        (out / f"tmp-{path.name}").rename(path)
        print(f"{start + len(matrix)} done, {time.process_time() - t0:.1f} CPU-s", flush=True)


if __name__ == "__main__":
    main()
