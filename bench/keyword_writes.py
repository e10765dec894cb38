"""Write latency of the embedded keyword backends on one disk: an upsert of 1 and of 50 rows, a delete by id.

    python -m bench.keyword_writes [DIRECTORY]

Each backend in a fresh temporary directory under DIRECTORY (default: the system's), warmed by one
write, then 10 rounds of (upsert n rows, delete one of them); medians in wall milliseconds. What a
worker's write batch or an API delete adds, mostly waiting for the disk (tantivy syncs each new
segment's files; FTS5 in WAL with synchronous=NORMAL syncs nothing per commit).
"""

import json
import os
import shutil
import statistics
import sys
import tempfile
import time


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loci.settings")
    import django

    django.setup()
    from retrieval.backends.base import IndexFilter, IndexRow
    from retrieval.backends.sqlite_fts import SqliteKeywordIndex
    from retrieval.backends.tantivy_keywords import TantivyKeywordIndex

    root = tempfile.mkdtemp(prefix="loci-kw-writes-", dir=argv[0] if argv else None)
    out = {"directory": root, "load average": round(os.getloadavg()[0], 2)}
    try:
        for name, index in (("fts5", SqliteKeywordIndex({"path": os.path.join(root, "keyword.sqlite3")})),
                            ("tantivy", TantivyKeywordIndex({"directory": os.path.join(root, "keyword-index")}))):
            index.upsert([IndexRow(id="memory:warm", tenant_id=1, kb_id=1, kind="atomic_fact", text="warm up")])
            for n in (1, 50):
                upserts, deletes = [], []
                for r in range(10):
                    rows = [IndexRow(id=f"memory:{n}-{r}-{i}", tenant_id=1, kb_id=1, kind="atomic_fact",
                                     text=f"a sentence about harbour tides number {i}") for i in range(n)]
                    t0 = time.perf_counter()
                    index.upsert(rows)
                    upserts.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    index.delete(IndexFilter(1, (1,), ids=(rows[0].id,), statuses=()))
                    deletes.append((time.perf_counter() - t0) * 1000)
                out[f"{name}: upsert of {n} rows, median ms"] = round(statistics.median(upserts), 1)
                out[f"{name}: delete of 1 row (after {n}-row upserts), median ms"] = round(statistics.median(deletes), 1)
            index.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
