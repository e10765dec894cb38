"""The server side: `python -m retrieval.milvus_lite serve` runs the milvus binary over one data
file, records itself for the clients to verify, and stops when its last user is gone."""

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

from retrieval.milvus_lite.processes import HOST, holds, listening_inodes
from retrieval.milvus_lite.registry import check_path, files_of, live_users

USERS_POLL = 1.0  # seconds between a server's checks that some user is still alive


def _die_with_parent(libc, parent: int):
    def preexec():
        # In the binary, before exec: SIGTERM when serve dies, even by SIGKILL, so the binary can
        # never outlive the process that holds Milvus Lite's file lock and counts its users.
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # serve died before prctl took effect
            os._exit(1)
    return preexec


def _unused(files: dict[str, Path], held: list) -> bool:
    """True (keeping the start lock until exit) when no user is alive, so no client can trust this server."""
    lock = open(files["start-lock"], "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # a client is registering or starting: look again next time
        lock.close()
        return False
    if live_users(files["users"]):
        lock.close()
        return False
    files["server.json"].unlink(missing_ok=True)
    held.append(lock)  # released when this process exits, after the binary has stopped
    return True


def serve(path, port: int, *, until_unused: bool = False) -> int:
    """Run the Milvus Lite server in the foreground until SIGTERM/SIGINT (or, `until_unused`, its last user exits)."""
    import ctypes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # milvus_lite imports the deprecated pkg_resources
        from milvus_lite.server import BIN_PATH

    path = check_path(path)
    files = files_of(path)

    def stop(signum, frame):
        raise SystemExit(0)

    # Handlers first: a SIGTERM during start must still stop the binary, not orphan it.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # The binary is started as milvus_lite.server.Server.start would, but not through Server: when
    # its lock is taken, Server's __del__ unlinks the lock file the running server holds, and the
    # next start then locks a new file and opens the same data twice. For the same reason the lock
    # file (the one Milvus Lite's local mode takes too) is never removed.
    bin_dir = Path(os.environ.get("BIN_PATH") or BIN_PATH).absolute()
    if not (bin_dir / "milvus").exists():
        print(f"the milvus binary is missing from {bin_dir}", file=sys.stderr)
        return 1
    milvus_lock = open(path.parent / f".{path.name}.lock", "a")
    try:
        fcntl.lockf(milvus_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"another Milvus Lite server holds {path}", file=sys.stderr)
        return 1
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH")}
    env["LD_LIBRARY_PATH"] = env["DYLD_LIBRARY_PATH"] = f"{bin_dir}:{os.environ.get('LD_LIBRARY_PATH', '')}"
    args = [str(bin_dir / "milvus"), str(path), f"{HOST}:{port}", os.environ.get("LOG_LEVEL", "ERROR")]
    binary, held = None, []
    try:
        binary = subprocess.Popen(args, env=env, cwd=str(path.parent),
                                  preexec_fn=_die_with_parent(ctypes.CDLL(None), os.getpid()))
        while not holds(binary.pid, listening_inodes(port)):
            if binary.poll() is not None:
                print(f"milvus exited with code {binary.returncode} before listening on port {port}", file=sys.stderr)
                return 1
            time.sleep(0.05)
        record = {"path": str(path), "port": port, "pid": os.getpid(), "milvus_pid": binary.pid}
        staged = files["server.json"].with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(json.dumps(record))
        staged.replace(files["server.json"])  # atomic: a client never reads half a record
        while True:
            try:
                # In TCP mode the milvus binary does not watch the lock file, so this process owns its lifetime.
                return binary.wait(timeout=USERS_POLL)
            except subprocess.TimeoutExpired:
                if until_unused and _unused(files, held):
                    return 0
    finally:
        if binary is not None and binary.poll() is None:
            binary.terminate()  # the binary exits promptly on SIGTERM
            try:
                binary.wait(timeout=10)
            except subprocess.TimeoutExpired:
                binary.kill()
                binary.wait()
        with contextlib.suppress(OSError, ValueError, KeyError):
            if json.loads(files["server.json"].read_text())["pid"] == os.getpid():
                files["server.json"].unlink()
        fcntl.lockf(milvus_lock, fcntl.LOCK_UN)
        milvus_lock.close()
