"""Ingestion speed per stage for text PDFs, against the issue's targets (one worker, no LLM).

    python -m bench.ingest_speed [--repeat 3]

1. parse + chunk + deterministic extraction, in-process: pages/s (target ≥ 50).
2. the whole pipeline through the database and both indexes (eager tasks, cold embedding cache),
   against the embedder alone on exactly the texts the pipeline embedded, in the same run
   (target: pipeline ≤ 1.2 × embedder alone; the embedder is the physical bound).
"""

import argparse
import logging
import resource
import tempfile
import time

from bench.harness import SHARED_DATA, setup_django

PDFS = [SHARED_DATA / "docs" / "unstructured" / "language-docs" / "fr_olap.pdf",
        SHARED_DATA / "docs" / "unstructured" / "pdf" / "layout-parser-paper-fast.pdf",
        SHARED_DATA / "docs" / "unstructured" / "pdf" / "a1977-backus-p21.pdf",
        SHARED_DATA / "docs" / "unstructured" / "pdf" / "fake-memo.pdf",
        SHARED_DATA / "docs" / "unstructured" / "pdf" / "interface-config-guide-p93.pdf"]


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stages(repeat: int) -> dict:
    from ingest.chunking import chunk_document
    from ingest.extraction import deterministic_extractor
    from ingest.extraction.base import ExtractionUnit, Passage
    from ingest.parsing.dispatch import parse_file

    extractor = deterministic_extractor()
    times = {"parse": 0.0, "chunk": 0.0, "extract": 0.0}
    pages = 0
    for round_ in range(repeat + 1):  # round 0 warms up: tiktoken's tables, jieba, fonts
        if round_ == 1:
            times, pages = dict.fromkeys(times, 0.0), 0
        for path in PDFS:
            t = cpu()
            parsed = parse_file(path, path.name)
            times["parse"] += cpu() - t
            t = cpu()
            parents = chunk_document(parsed)
            times["chunk"] += cpu() - t
            t = cpu()
            for p in parents:
                extractor.extract(ExtractionUnit(" › ".join(p.section_path) or p.title,
                                                 [Passage(str(i), c.text) for i, c in enumerate(p.children)]))
            times["extract"] += cpu() - t
            pages += parsed.page_count or 1
    total = sum(times.values())
    return {"pages": pages, **{k: round(v, 3) for k, v in times.items()},
            "pages/s (CPU, parse+chunk+extract)": round(pages / total, 1)}


def pipeline() -> dict:

    from bench.harness import make_scope
    from ingest.actions import ingest_document
    from memory.models import Document
    from retrieval import projection
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
    raw = build_provider("e5-small")
    raw.embed_documents(["warm up"])
    t0 = time.perf_counter()
    for start in range(0, len(embedded), projection.EMBED_BATCH):
        raw.embed_documents(embedded[start:start + projection.EMBED_BATCH])
    alone = time.perf_counter() - t0
    return {"documents": len(docs), "ready": sum(d.status == "ready" for d in docs), "pages": pages,
            "texts embedded": len(embedded), "pipeline wall s": round(wall, 2),
            "embedder alone wall s": round(alone, 2), "ratio": round(wall / alone, 2),
            "pipeline pages/s": round(pages / wall, 2)}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    setup_django(tempfile.mkdtemp(prefix="loci-speed-"))
    logging.disable(logging.WARNING)
    from retrieval.embeddings import embedder

    embedder().embed_documents(["load the model before timing"])
    print("stages (CPU seconds):", stages(args.repeat))
    print("pipeline vs embedder:", pipeline())


if __name__ == "__main__":
    main()
