"""Ingestion speed per stage for text PDFs, against the issue's targets (one worker, no LLM).

    python -m bench.ingest_speed [--repeat 3] [--locomo-convs 0] [--cmrc-passages 10] [--only texts]

1. parse + chunk + deterministic extraction, in-process: pages/s (target ≥ 50).
2. the whole pipeline through the database and both indexes (eager tasks, cold embedding cache),
   against the embedder alone on exactly the texts the pipeline embedded, in the same run
   (target: pipeline ≤ 1.2 × embedder alone; the embedder is the physical bound).
3. CPU seconds of the whole pipeline per 1,000 LoCoMo messages (posted and flushed through the
   REST API, as bench.locomo does, no LLM) and per CMRC passage (each a document), cold embedding
   cache, with the configured LOCI_EMBEDDER; beside each, the CPU seconds of that embedder alone
   (uncached, same process) on exactly the texts the pipeline sent to the indexes. CPU is this
   process's (every thread: the ONNX runtime's too) plus the local Milvus Lite server's.
"""

import argparse
import json
import logging
import os
import tempfile
import time
from pathlib import Path

from bench.harness import SHARED_DATA, cpu_seconds, setup_django

PDFS = [SHARED_DATA / "docs" / "unstructured" / "language-docs" / "fr_olap.pdf",
        SHARED_DATA / "docs" / "unstructured" / "pdf" / "layout-parser-paper-fast.pdf",
        SHARED_DATA / "docs" / "unstructured" / "pdf" / "a1977-backus-p21.pdf",
        SHARED_DATA / "docs" / "unstructured" / "pdf" / "fake-memo.pdf",
        SHARED_DATA / "docs" / "unstructured" / "pdf" / "interface-config-guide-p93.pdf"]



def stages(repeat: int) -> dict:
    from ingest.chunking import chunk_document
    from extraction import deterministic_extractor
    from extraction.base import ExtractionUnit, Passage
    from ingest.parsing.dispatch import parse_file

    extractor = deterministic_extractor()
    times = {"parse": 0.0, "chunk": 0.0, "extract": 0.0}
    pages = 0
    for round_ in range(repeat + 1):  # round 0 warms up: tiktoken's tables, jieba, fonts
        if round_ == 1:
            times, pages = dict.fromkeys(times, 0.0), 0
        for path in PDFS:
            t = cpu_seconds()
            parsed = parse_file(path, path.name)
            times["parse"] += cpu_seconds() - t
            t = cpu_seconds()
            parents = chunk_document(parsed)
            times["chunk"] += cpu_seconds() - t
            t = cpu_seconds()
            for p in parents:
                extractor.extract(ExtractionUnit(" › ".join(p.section_path) or p.title,
                                                 [Passage(str(i), c.text) for i, c in enumerate(p.children)]))
            times["extract"] += cpu_seconds() - t
            pages += parsed.page_count or 1
    total = sum(times.values())
    return {"pages": pages, **{k: round(v, 3) for k, v in times.items()},
            "pages/s (CPU, parse+chunk+extract)": round(pages / total, 1)}


def pipeline() -> dict:

    from django.conf import settings

    from bench.harness import make_scope
    from ingest.actions import ingest_document
    from memory.models import Document
    from retrieval.projection import writes as projection
    from retrieval.embeddings import build_provider

    scope, kb = make_scope("speed", "speed")
    embedded: list[str] = []
    real_write_rows = projection.write_rows

    def recording(rows, **kwargs):  # the texts the index stage embedded, for the side-by-side run
        embedded.extend(r.text for r in rows)
        return real_write_rows(rows, **kwargs)

    projection.write_rows = recording
    t0 = time.perf_counter()
    for path in PDFS:
        with path.open("rb") as fh:
            ingest_document(scope, kb, fh, path.name)
    wall = time.perf_counter() - t0
    projection.write_rows = real_write_rows
    docs = list(Document.objects.filter(kb=kb))
    pages = sum(d.page_count or 1 for d in docs)
    raw = build_provider(settings.LOCI_EMBEDDER)
    raw.embed_documents(["warm up"])
    t0 = time.perf_counter()
    for start in range(0, len(embedded), projection.EMBED_BATCH):
        raw.embed_documents(embedded[start:start + projection.EMBED_BATCH])
    alone = time.perf_counter() - t0
    return {"documents": len(docs), "ready": sum(d.status == "ready" for d in docs), "pages": pages,
            "texts embedded": len(embedded), "pipeline wall s": round(wall, 2),
            "embedder alone wall s": round(alone, 2), "ratio": round(wall / alone, 2),
            "pipeline pages/s": round(pages / wall, 2)}


def lite_server_cpu() -> float:
    """CPU seconds of the processes serving this run's Milvus Lite file (its `serve` wrapper and the binary)."""
    from django.conf import settings

    path = str(settings.LOCI_VECTOR_INDEX["OPTIONS"]["lite_path"])
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if path not in (entry / "cmdline").read_bytes().decode(errors="replace"):
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


class Recorded:
    """The texts the index stage embeds, recorded while the pipeline runs."""

    def __init__(self):
        from retrieval.projection import writes as projection

        self.texts: list[str] = []
        self._real = projection.write_rows

    def __enter__(self):
        from retrieval.projection import writes as projection

        def recording(rows, **kwargs):
            self.texts.extend(r.text for r in rows)
            return self._real(rows, **kwargs)

        projection.write_rows = recording
        return self

    def __exit__(self, *exc):
        from retrieval.projection import writes as projection

        projection.write_rows = self._real


def embedder_alone_cpu(texts: list[str]) -> float:
    from django.conf import settings

    from retrieval.projection import writes as projection
    from retrieval.embeddings import build_provider

    raw = build_provider(settings.LOCI_EMBEDDER)  # uncached
    raw.embed_documents(["warm up"])
    t = cpu_seconds()
    for start in range(0, len(texts), projection.EMBED_BATCH):
        raw.embed_documents(texts[start:start + projection.EMBED_BATCH])
    return cpu_seconds() - t


def conversations(indices: list[int]) -> dict:
    from bench import locomo

    client = locomo.api_client()
    stats = dict.fromkeys(("ingest_seconds", "messages", "episodes", "facts", "merged_duplicates", "superseded"), 0)
    convs = locomo.load(SHARED_DATA / "locomo" / "locomo10_dev.json", indices)
    with Recorded() as rec:
        t, server = cpu_seconds(), lite_server_cpu()
        for conv in convs:
            locomo.ingest(client, conv, stats)
        spent = cpu_seconds() - t + lite_server_cpu() - server
    alone = embedder_alone_cpu(rec.texts)
    per = 1000 / max(1, stats["messages"])
    return {"conversations": indices, "messages": stats["messages"], "episodes": stats["episodes"],
            "facts": stats["facts"], "texts embedded": len(rec.texts), "pipeline CPU s": round(spent, 1),
            "pipeline CPU s per 1,000 messages": round(spent * per, 1),
            "embedder alone CPU s": round(alone, 1), "embedder alone per 1,000 messages": round(alone * per, 1),
            "ratio": round(spent / alone, 2), "wall s": round(stats["ingest_seconds"], 1)}


def passages(limit: int) -> dict:
    from bench import cmrc
    from bench.harness import make_scope
    from ingest.actions import ingest_document
    from memory.models import Document

    scope, kb = make_scope("cmrc-speed", "cmrc-speed")
    chosen = cmrc.load(cmrc.DEFAULT_PATH, limit)
    workdir = Path(tempfile.mkdtemp(prefix="loci-speed-cmrc-"))
    with Recorded() as rec:
        t, server = cpu_seconds(), lite_server_cpu()
        for i, p in enumerate(chosen):
            path = workdir / str(i) / cmrc.file_name(p, "title")
            path.parent.mkdir()
            path.write_text(p["context"], encoding="utf-8")
            with path.open("rb") as fh:
                ingest_document(scope, kb, fh, path.name)
        spent = cpu_seconds() - t + lite_server_cpu() - server
    alone = embedder_alone_cpu(rec.texts)
    ready = Document.objects.filter(kb=kb, status="ready").count()
    chars = sum(len(p["context"]) for p in chosen)
    return {"passages": len(chosen), "ready": ready, "characters": chars, "texts embedded": len(rec.texts),
            "pipeline CPU s": round(spent, 1), "pipeline CPU s per passage": round(spent / len(chosen), 2),
            "embedder alone CPU s per passage": round(alone / len(chosen), 2), "ratio": round(spent / alone, 2)}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--locomo-convs", default="0", help="LoCoMo conversations to ingest (comma-separated)")
    parser.add_argument("--cmrc-passages", type=int, default=10)
    parser.add_argument("--only", choices=("pdfs", "texts"), help="run only the PDF part or only the LoCoMo/CMRC part")
    args = parser.parse_args(argv)
    os.environ.setdefault("LLM_DISABLED", "1")  # the deterministic pipeline: no LLM
    setup_django(tempfile.mkdtemp(prefix="loci-speed-"))
    logging.disable(logging.WARNING)
    from django.conf import settings

    from retrieval.embeddings import embedder

    embedder().embed_documents(["load the model before timing"])
    print("embedder:", settings.LOCI_EMBEDDER, flush=True)
    if args.only != "texts":
        print("stages (CPU seconds):", stages(args.repeat), flush=True)
        print("pipeline vs embedder:", pipeline(), flush=True)
    if args.only != "pdfs":
        print("LoCoMo messages:", json.dumps(conversations([int(i) for i in args.locomo_convs.split(",")])), flush=True)
        print("CMRC passages:", json.dumps(passages(args.cmrc_passages)), flush=True)


if __name__ == "__main__":
    main()
