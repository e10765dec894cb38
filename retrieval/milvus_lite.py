"""The embedded Milvus Lite server: one local process that web, workers and tests reach by URI.

Milvus Lite locks its data file to a single process, so no Loci process opens the file itself.
`ensure_server` starts `python -m retrieval.milvus_lite serve` detached (once: a file lock
serialises concurrent starters) and waits until its port answers; every process then connects
with a MilvusClient exactly as it would to a Milvus cluster.
"""

import argparse
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"  # never exposed beyond the machine: Milvus Lite has no authentication
_children: list[subprocess.Popen] = []  # kept so a started server is not reported as leaked


def _answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _files(path: Path) -> dict[str, Path]:
    return {name: path.parent / f".{path.name}.{name}" for name in ("start-lock", "pid", "log")}


def _check_path(path) -> Path:
    path = Path(path).resolve()
    # Milvus Lite's own limits on the file name; checked here to fail with the reason, not a timeout.
    if len(path.name) > 36 or not all(c.isalnum() or c in ".-_" for c in path.name):
        raise ValueError(f"Milvus Lite file name {path.name!r} must be at most 36 chars of [A-Za-z0-9._-]")
    return path


def ensure_server(path, port: int, *, timeout: float = 60.0) -> str:
    """Start the Milvus Lite server over `path` on 127.0.0.1:`port` unless it is up; return its URI."""
    uri = f"http://{HOST}:{port}"
    if _answers(port):
        return uri
    path = _check_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    files = _files(path)
    with open(files["start-lock"], "a") as lock:
        # Web and worker processes may all arrive here at boot; the first starts the server, the
        # others wait on the lock and then find the port answering.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _answers(port):
            return uri
        python_path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": python_path}
        with open(files["log"], "ab") as log:
            child = subprocess.Popen(
                [sys.executable, "-m", "retrieval.milvus_lite", "serve", "--path", str(path), "--port", str(port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(path.parent),
                start_new_session=True,  # outlives the process that happened to start it, and its Ctrl-C
            )
        _children.append(child)
        deadline = time.monotonic() + timeout
        while not _answers(port):
            if child.poll() is not None:
                raise RuntimeError(f"Milvus Lite server exited with code {child.returncode}; see {files['log']}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Milvus Lite server did not answer on port {port} within {timeout:.0f}s")
            time.sleep(0.1)
    return uri


def stop_server(path, *, timeout: float = 10.0) -> bool:
    """Stop the server started for `path` (by the pid it recorded); False if none was running."""
    pid_file = _files(_check_path(path))["pid"]
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline")
        if cmdline.parent.parent.is_dir() and b"retrieval.milvus_lite" not in cmdline.read_bytes():
            raise ProcessLookupError  # a stale pid file whose pid now belongs to someone else
        os.kill(pid, signal.SIGTERM)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        pid_file.unlink(missing_ok=True)
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # serve removes the pid file as its last act; our own child must also be reaped.
        for child in _children:
            child.poll()
        if not pid_file.exists():
            return True
        time.sleep(0.05)
    return False


def serve(path, port: int) -> int:
    """Run the Milvus Lite server in the foreground until SIGTERM/SIGINT."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # milvus_lite imports the deprecated pkg_resources
        from milvus_lite.server import Server

    path = _check_path(path)
    pid_file = _files(path)["pid"]

    def stop(signum, frame):
        raise SystemExit(0)

    # Handlers first: a SIGTERM during start() must still stop the binary, not orphan it.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    pid_file.write_text(str(os.getpid()))  # before start: the port answers before start() returns
    server = Server(str(path), address=f"{HOST}:{port}")
    try:
        if not server.init() or not server.start():  # start() also takes Milvus Lite's own file lock
            return 1
        # In TCP mode the milvus binary does not watch the lock file, so this process owns its lifetime.
        return server._p.wait()
    finally:
        if server._p is not None and server._p.poll() is None:
            server._p.terminate()  # the binary exits promptly on SIGTERM
            try:
                server._p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server._p.kill()
        server.stop()
        pid_file.unlink(missing_ok=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m retrieval.milvus_lite")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="run the Milvus Lite server in the foreground")
    run.add_argument("--path", required=True, help="Milvus Lite data file, e.g. var/milvus.db")
    run.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    return serve(args.path, args.port)


if __name__ == "__main__":
    sys.exit(main())
