"""What the sheet viewer costs per request: reading a whole sheet from its original and aligning the
sheet's chunk lines with its rows (console/viewer_citations.py), against parsing the same file.

Run from the repository root: .venv/bin/python -m bench.sheet_viewer [--rows 2000 20000]
Generates the workbooks (6 columns); wall seconds, so a busy machine makes them pessimistic.
"""

import argparse
import tempfile
import time
from pathlib import Path

import openpyxl

from console.viewer_citations import cited_rows
from ingest.chunking import chunk_document
from ingest.original_readers import _xlsx_sheet
from ingest.parsing.xlsx import parse


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[2000, 20000])
    args = parser.parse_args()
    for n in args.rows:
        workbook = openpyxl.Workbook()
        sheet = workbook.active
        sheet.title = "Data"
        sheet.append(["id", "name", "city", "amount", "date", "note"])
        for i in range(n):
            sheet.append([i, f"name {i}", f"city {i % 97}", i * 1.5, "2024-01-01", "x" * 20])
        path = Path(tempfile.mkdtemp()) / "big.xlsx"
        workbook.save(path)
        started = time.perf_counter()
        parents = chunk_document(parse(path, filename="big.xlsx"))
        parsed = time.perf_counter() - started
        children = [(k, c.text) for k, c in enumerate(c for parent in parents for c in parent.children)]
        started = time.perf_counter()
        rows = _xlsx_sheet(path, "Data").rows
        read = time.perf_counter() - started
        started = time.perf_counter()
        cited = cited_rows(rows, children, {len(children) - 1})  # the last chunk: the whole sheet is walked
        aligned = time.perf_counter() - started
        print(f"rows={n} file={path.stat().st_size / 1e6:.2f} MB parse+chunk={parsed:.2f} s "
              f"read sheet={read:.2f} s align={aligned:.3f} s chunks={len(children)} last chunk rows={cited}")


if __name__ == "__main__":
    import django

    django.setup()
    main()
