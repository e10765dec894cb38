"""Parser speed on the shared test files: text-PDF pages/s, and OCR s/page (parser vs raw tesseract CLI).

Run from the repository root: .venv/bin/python -m bench.parse_speed [--repeat 5]
CPU seconds (this process plus its tesseract children) are what one uncontended core would take; wall
seconds also count waiting for a busy machine.
"""

import argparse
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path

import pymupdf

from ingest.parsing import image, pdf
from ingest.parsing.ocr import OCR_LANGUAGES

DOCS = Path(os.environ.get("LOCI_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")) / "docs"
UNSTRUCTURED = DOCS / "unstructured"
SCANNED_PDF = UNSTRUCTURED / "pdf" / "loremipsum-flat.pdf"
SCREENSHOT = UNSTRUCTURED / "img" / "DA-1p.png"


def text_pdfs() -> list[Path]:
    paths = sorted((UNSTRUCTURED / "pdf").glob("*.pdf")) + [UNSTRUCTURED / "language-docs" / "fr_olap.pdf"]
    skip = {"password.pdf", SCANNED_PDF.name}
    return [path for path in paths if path.name not in skip]


def bench_text_pdfs(repeat: int) -> None:
    print(f"Text PDFs, {repeat} parses each, one process:            CPU pages/s   wall pages/s")
    total_pages = total_cpu = total_wall = 0.0
    for path in text_pdfs():
        pdf.parse(path, filename=path.name)  # warm caches (fonts, imports) outside the timing
        wall, cpu = _measure(lambda: [pdf.parse(path, filename=path.name) for _ in range(repeat)])
        parsed = pdf.parse(path, filename=path.name)
        pages = parsed.page_count * repeat
        total_pages, total_cpu, total_wall = total_pages + pages, total_cpu + cpu, total_wall + wall
        tables = parsed.metadata["tables"]
        print(f"  {path.name:34} {parsed.page_count:3} p {tables} tables {pages / cpu:9.1f} {pages / wall:14.1f}")
    print(f"  {'all':34}                {total_pages / total_cpu:9.1f} {total_pages / total_wall:14.1f}\n")


def bench_ocr() -> None:
    print(f"OCR, -l {OCR_LANGUAGES}, seconds per page:")
    with tempfile.TemporaryDirectory() as tmp:
        rendered = Path(tmp) / "page.pgm"
        with pymupdf.open(SCANNED_PDF) as document:
            pixmap = document[0].get_pixmap(dpi=pdf.OCR_DPI, colorspace=pymupdf.csGRAY, alpha=False)
            pixmap.save(rendered)
        cli = ["tesseract", str(rendered), "stdout", "-l", OCR_LANGUAGES]
        one_thread = {**os.environ, "OMP_THREAD_LIMIT": "1"}
        rows = [
            ("tesseract CLI, default threads", lambda: subprocess.run(cli, capture_output=True, check=True)),
            ("tesseract CLI, OMP_THREAD_LIMIT=1", lambda: subprocess.run(cli, capture_output=True, env=one_thread)),
            ("pdf.parse (render + OCR)", lambda: pdf.parse(SCANNED_PDF, filename=SCANNED_PDF.name)),
        ]
        print(f"  {SCANNED_PDF.name}, page rendered at {pdf.OCR_DPI} dpi ({pixmap.width}x{pixmap.height}):")
        print(f"    {'':36} {'CPU s':>6} {'wall s':>7}")
        for label, run in rows:
            wall, cpu = _measure(run)
            print(f"    {label:36} {cpu:6.2f} {wall:7.2f}")
    wall, cpu = _measure(lambda: image.parse(SCREENSHOT, filename=SCREENSHOT.name))
    print(f"  {SCREENSHOT.name} (595x842):")
    print(f"    {'image.parse':36} {cpu:6.2f} {wall:7.2f}")


def _measure(run) -> tuple[float, float]:
    """Wall seconds, and CPU seconds of this process and the children it waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, cpu + (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="parses per text PDF")
    parser.add_argument("--no-ocr", action="store_true", help="skip the (slow) OCR timings")
    args = parser.parse_args()
    bench_text_pdfs(args.repeat)
    if not args.no_ocr:
        bench_ocr()


if __name__ == "__main__":
    main()
