"""Where ingestion's embedder CPU goes: every text the model encodes while one LoCoMo conversation is
ingested (no LLM, cold embedding cache), grouped by the call site that asked for it.

    python -m bench.embed_census [--conv 0] [--dump texts.json]

Prints the process's CPU per 1,000 messages (as bench.ingest_speed counts it) and, per call site,
the calls, texts, tokens (<s> and </s> included) and the model's CPU. Needs LOCI_EMBEDDER=e5-small-onnx
(the default): it wraps that runtime's encode, below the embedding cache, so cache hits do not count.
"""

import argparse
import json
import logging
import os
import tempfile
import time
import traceback
from collections import defaultdict

from bench.harness import SHARED_DATA, setup_django

_OWN = ("/retrieval/embeddings/", "/common/metrics")


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--conv", type=int, default=0)
    parser.add_argument("--dump", help="write every call (site, texts, tokens, CPU) to this JSON file")
    args = parser.parse_args(argv)
    os.environ.setdefault("LLM_DISABLED", "1")
    setup_django(tempfile.mkdtemp(prefix="loci-census-"))
    logging.disable(logging.WARNING)
    from bench import locomo
    from bench.ingest_speed import cpu
    from retrieval.embeddings import e5_onnx, embedder

    embedder().embed_documents(["load the model before counting"])
    calls = []
    real = e5_onnx._Runtime.encode

    def encode(self, texts, prefix, session=None):
        frame = [f for f in traceback.extract_stack()[:-1] if not any(s in f.filename for s in _OWN)][-1]
        started = time.process_time()
        out = real(self, texts, prefix, session)
        spent = time.process_time() - started
        tokens = [len(self.tokenizer.content_ids(prefix + e5_onnx._clean(t))) + 2 for t in texts]
        calls.append({"site": f"{os.path.basename(frame.filename)}:{frame.name}", "texts": texts,
                      "tokens": tokens, "cpu": spent})
        return out

    e5_onnx._Runtime.encode = encode
    stats = dict.fromkeys(("ingest_seconds", "messages", "episodes", "facts", "merged_duplicates", "superseded"), 0)
    conv = locomo.load(SHARED_DATA / "locomo" / "locomo10_dev.json", [args.conv])[0]
    started = cpu()
    locomo.ingest(locomo.api_client(), conv, stats)
    total = cpu() - started
    e5_onnx._Runtime.encode = real
    print(f"conversation {args.conv}: {stats['messages']} messages, {total:.1f} CPU-s, "
          f"{total * 1000 / max(1, stats['messages']):.1f} CPU-s per 1,000 messages")
    sites = defaultdict(lambda: {"calls": 0, "texts": 0, "tokens": 0, "cpu": 0.0})
    for call in calls:
        site = sites[call["site"]]
        site["calls"] += 1
        site["texts"] += len(call["texts"])
        site["tokens"] += sum(call["tokens"])
        site["cpu"] += call["cpu"]
    for name, site in sorted(sites.items(), key=lambda kv: -kv[1]["cpu"]):
        print(f"  {name}: {site['calls']} calls, {site['texts']} texts, {site['tokens']} tokens, "
              f"{site['cpu']:.1f} CPU-s ({1000 * site['cpu'] / max(1, site['tokens']):.2f} ms per token)")
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as fh:
            json.dump(calls, fh)


if __name__ == "__main__":
    main()
