"""Ingestion wall time under `manage.py up --concurrency 2` of a given checkout (issue 30, item 0).

    python -m bench.worker_pools CHECKOUT LABEL FOLDER

Runs that checkout's `up` (the current one: two solo workers; an older one: a prefork pool of two)
over a var dir and embedding cache of its own, ingests every file of FOLDER together and prints the
wall time from `ingest` to the last document ending. Alternate the checkouts, and note the load.
"""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main(checkout: str, label: str, folder: str) -> None:
    python = sys.executable
    var = tempfile.mkdtemp(prefix=f"bench-{label}-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCI_", "MILVUS_", "DJANGO_", "CELERY_",
                                                                    "EMBEDDING_"))}
    env.update(PYTHONPATH=checkout, LOCI_VAR_DIR=var, LOCI_PORT=str(free_port()), MILVUS_LITE_PORT=str(free_port()),
               LLM_DISABLED="1", EMBEDDING_CACHE_PATH=f"{var}/embedding-cache.sqlite3",
               LOCI_MODELS_DIR=os.environ.get("LOCI_MODELS_DIR", os.path.abspath("var/models")))

    def manage(*args):
        subprocess.run([python, "manage.py", *args], cwd=checkout, env=env, check=True, capture_output=True)

    manage("migrate", "--no-input", "-v", "0")
    manage("bootstrap", "--tenant", "acme", "--kb", "docs")
    log_path = f"{var}/up.log"
    with open(log_path, "wb") as log:
        up = subprocess.Popen([python, "manage.py", "up", "--concurrency", "2"], cwd=checkout, env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while "Loci is up" not in open(log_path).read() or " ready." not in open(log_path).read():
            time.sleep(0.5)
        time.sleep(5)
        started = time.monotonic()
        manage("ingest", folder, "--tenant", "acme", "--kb", "docs")
        with sqlite3.connect(f"{var}/loci.sqlite3") as db:
            while True:
                rows = dict(db.execute("SELECT status, count(*) FROM ingest_document GROUP BY status").fetchall())
                if set(rows) <= {"ready", "failed"}:
                    break
                time.sleep(0.5)
        print(f"{label}: {rows} in {time.monotonic() - started:.1f} s wall")
    finally:
        os.killpg(up.pid, signal.SIGTERM)
        up.wait(60)


if __name__ == "__main__":
    main(*sys.argv[1:4])
