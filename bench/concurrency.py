"""Search under concurrent load, over HTTP, against a real `manage.py up`, while a worker ingests.

    python -m bench.concurrency [--clients 1,4,16] [--seconds 40] [--docs 30]

Starts `manage.py up` (uvicorn + one Celery worker + Milvus Lite) on a fresh var dir and a free
port, bootstraps a tenant and an API key, ingests a first batch of CMRC passages and waits until
they are ready, then, for each N, runs N client threads that search in a closed loop (each
request waits for its answer before the next) for --seconds while more documents are uploaded
and ingested by the worker. Each client cycles through the methods (keyword, vector, hybrid with
chunks), so the load weighs on every method alike. A request that takes longer than --hang-after
seconds counts as a hang; a non-200 answer as an error.

Prints one JSON line per N with p50/p95 per method, errors and hangs, and the p95 ratio of each N
to N=1 from the same run.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from bench.harness import SHARED_DATA, percentile

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("keyword", "vector", "hybrid")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def passages() -> tuple[list[tuple[str, str]], list[str]]:
    cmrc = json.loads((SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json").read_text())
    docs, questions = [], []
    for article in cmrc["data"]:
        for p in article["paragraphs"]:
            docs.append((f"{article.get('title') or p['id']}-{p['id']}.txt", p["context"]))
            questions += [qa["question"] for qa in p["qas"] if qa["question"].strip()]
    locomo = json.loads((SHARED_DATA / "locomo" / "locomo10_dev.json").read_text())
    questions += [qa["question"] for conv in locomo[:1] for qa in conv["qa"]]
    return docs, questions


class Loci:
    def __init__(self, base: str, key: str):
        self.base, self.key = base, key

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json",
                timeout: float = 60.0):
        req = urllib.request.Request(self.base + path, data=body, method=method, headers={
            "Authorization": f"Bearer {self.key}", "Content-Type": content_type})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")

    def upload(self, name: str, text: str) -> int:
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"kb\"\r\n\r\ndocs\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
                f"Content-Type: text/plain\r\n\r\n").encode() + text.encode() + f"\r\n--{boundary}--\r\n".encode()
        _, data = self.request("POST", "/api/v1/documents", body, f"multipart/form-data; boundary={boundary}")
        return data[0]["document"]["id"]

    def status(self, doc_id: int) -> str:
        return self.request("GET", f"/api/v1/documents/{doc_id}")[1]["status"]


def start_up(var: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "LOCI_VAR_DIR": str(var), "MILVUS_LITE_PORT": str(free_port()), "LOCI_PORT": str(port),
           "LOCI_WORKER_CONCURRENCY": "1", "PYTHONPATH": str(ROOT),
           # N clients share one key, as fast as they can: the per-key rates would be what is measured.
           "LOCI_RATE_LIMIT_USER": "off", "LOCI_RATE_LIMIT_SEARCH": "off"}
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], env=env, check=True, cwd=ROOT)
    out = subprocess.run([*manage, "bootstrap", "--tenant", "bench", "--kb", "docs", "--api-key"], env=env,
                         check=True, cwd=ROOT, capture_output=True, text=True).stdout
    key = next(line.split(": ", 1)[1].strip() for line in out.splitlines() if line.startswith("API key"))
    proc = subprocess.Popen([*manage, "up"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    proc.key = key
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
            return proc
        except urllib.error.HTTPError:
            return proc  # it answers (a 503 names an engine still starting)
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise RuntimeError("manage.py up did not answer within 120 s")


def wait_ready(loci: Loci, ids: list[int], timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    pending = set(ids)
    while pending and time.monotonic() < deadline:
        pending = {i for i in pending if loci.status(i) not in ("ready", "failed")}
        time.sleep(1)
    if pending:
        raise RuntimeError(f"{len(pending)} documents not ready after {timeout} s")


def load(loci: Loci, clients: int, seconds: float, questions: list[str], hang_after: float) -> dict:
    latencies = {m: [] for m in METHODS}
    errors, hangs, lock = [], [], threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(n: int):
        i = n
        while time.monotonic() < stop_at:
            method = METHODS[i % len(METHODS)]
            body = {"query": questions[i % len(questions)], "method": method, "top_k": 10,
                    "memory_types": ["episode", "atomic_fact", "chunk"]}
            i += clients
            started = time.monotonic()
            try:
                status, _ = loci.request("POST", "/api/v1/memories/search", json.dumps(body).encode(),
                                         timeout=hang_after)
            except urllib.error.HTTPError as exc:
                status = exc.code
            except (TimeoutError, urllib.error.URLError, OSError) as exc:
                with lock:
                    (hangs if "timed out" in str(exc) else errors).append(f"{type(exc).__name__}: {exc}")
                continue
            took = (time.monotonic() - started) * 1000
            with lock:
                if status == 200:
                    latencies[method].append(took)
                else:
                    errors.append(f"HTTP {status}")

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"clients": clients, "requests": sum(len(v) for v in latencies.values()), "errors": len(errors),
            "hangs": len(hangs), "error_samples": sorted(set(errors + hangs))[:3],
            **{f"{m}_p50_ms": round(percentile(v, 50), 1) for m, v in latencies.items()},
            **{f"{m}_p95_ms": round(percentile(v, 95), 1) for m, v in latencies.items()},
            "all_p95_ms": round(percentile([x for v in latencies.values() for x in v], 95), 1)}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--docs", type=int, default=30, help="documents ingested before the load")
    parser.add_argument("--hang-after", type=float, default=60)
    args = parser.parse_args(argv)
    docs, questions = passages()
    var = Path(tempfile.mkdtemp(prefix="loci-bench-concurrency-"))
    port = free_port()
    proc = start_up(var, port)
    try:
        loci = Loci(f"http://127.0.0.1:{port}", proc.key)
        wait_ready(loci, [loci.upload(name, text) for name, text in docs[: args.docs]])
        background = iter(docs[args.docs:])
        rows = []
        for n in (int(x) for x in args.clients.split(",")):
            for name, text in [next(background, (None, None)) for _ in range(6)]:  # the worker ingests meanwhile
                if name:
                    loci.upload(name, text)
            rows.append(load(loci, n, args.seconds, questions, args.hang_after))
            rows[-1]["p95_ratio_to_1"] = round(rows[-1]["all_p95_ms"] / rows[0]["all_p95_ms"], 2)
            rows[-1]["load_avg"] = round(os.getloadavg()[0], 1)
            print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
