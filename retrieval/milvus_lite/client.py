"""The client side: start the server over a data file unless it runs (once, under the start lock),
register this process as its user, and let go of it (stopping it when no user is left)."""

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from retrieval.milvus_lite.processes import HOST, answers, free_port, identity, port_holder
from retrieval.milvus_lite.registry import check_path, files_of, is_serve, live_users, register, running, start_lock

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
START_ATTEMPTS = 3  # free ports tried when none is configured (another program may take one first)
_children: list[subprocess.Popen] = []  # kept so a started server is reaped, not left a zombie
_release_registered: set[tuple[int, Path]] = set()  # (pid, path): an atexit release is registered


def ensure_server(path, port: int | None = None, *, timeout: float = 60.0) -> str:
    """The URI of the Milvus Lite server over `path`, started if none serves it; this process becomes a user.

    `port` None (or 0) takes the port a running server has, else a free one. A given port that
    something other than this file's server holds raises RuntimeError naming both, rather than
    connecting to it.
    """
    path = check_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    files = files_of(path)
    with start_lock(path):
        register(files["users"])  # before the check: a server that sees no user left stops
        record = running(path) or _start(path, port or None, files, timeout)
    key = (os.getpid(), path)
    if key not in _release_registered:
        _release_registered.add(key)
        atexit.register(release, path)
    return f"http://{HOST}:{record['port']}"


def _start(path: Path, port: int | None, files: dict[str, Path], timeout: float) -> dict:
    if port and answers(port):
        raise RuntimeError(
            f"Milvus Lite port {port} (MILVUS_LITE_PORT) is held by {port_holder(port)}, which cannot be "
            f"verified as the server of this installation's {path}; refusing to use it, as it may be another "
            f"installation's index. Set MILVUS_LITE_PORT to a free port, or leave it unset to pick one.")
    ports = [port] if port else _candidate_ports(files["port"])
    failures = []
    for candidate in ports:
        record, failure = _spawn(path, candidate, files, timeout)
        if record is not None:
            files["port"].write_text(str(candidate))
            return record
        failures.append(failure)
    raise RuntimeError(f"Milvus Lite server over {path} did not start: {'; '.join(failures)} "
                       f"(last logged: {_last_line(files['log'])!r}; see {files['log']})")


def _last_line(log: Path) -> str:
    with contextlib.suppress(OSError, IndexError):
        return log.read_text(errors="replace").strip().splitlines()[-1][-300:]
    return ""


def _candidate_ports(remembered: Path) -> list[int]:
    # The port of the last run first: a process whose client outlived a server restart reconnects there.
    ports = []
    with contextlib.suppress(OSError, ValueError):
        last = int(remembered.read_text())
        if 1024 <= last <= 65535 and not answers(last):
            ports.append(last)
    while len(ports) < START_ATTEMPTS:
        ports.append(free_port())
    return ports


def _spawn(path: Path, port: int, files: dict[str, Path], timeout: float) -> tuple[dict | None, str]:
    python_path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": python_path}
    with open(files["log"], "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "retrieval.milvus_lite", "serve", "--path", str(path), "--port", str(port),
             "--until-unused"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(path.parent),
            start_new_session=True,  # its lifetime follows its users, not the starter's terminal or group
        )
    _children.append(child)
    deadline = time.monotonic() + timeout
    while True:
        record = running(path)
        if record is not None and record["pid"] == child.pid:
            return record, ""
        if child.poll() is not None:
            return None, f"exited with code {child.returncode} on port {port}"
        if time.monotonic() > deadline:
            child.terminate()
            child.wait()
            return None, f"not serving on port {port} within {timeout:.0f}s"
        time.sleep(0.1)


def release(path, *, timeout: float = 10.0) -> bool:
    """This process no longer uses the server over `path`: stop it if no other user is alive. True if stopped."""
    path = check_path(path)
    files = files_of(path)
    me = identity(os.getpid())
    if me:
        (files["users"] / me).unlink(missing_ok=True)
    if not files["start-lock"].parent.is_dir():
        return False
    with start_lock(path):
        if live_users(files["users"]):
            return False
        return _stop(path, files, timeout)


def stop_server(path, *, timeout: float = 10.0) -> bool:
    """Stop the server over `path` whoever uses it; False if none was running."""
    path = check_path(path)
    if not path.parent.is_dir():
        return False
    with start_lock(path):
        return _stop(path, files_of(path), timeout)


def _stop(path: Path, files: dict[str, Path], timeout: float) -> bool:
    try:
        pid = int(json.loads(files["server.json"].read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not identity(pid) or not is_serve(pid, path):  # a stale record whose pid is gone or now someone else's
        files["server.json"].unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in _children:
            child.poll()  # reap our own child, or it stays a zombie
        if not identity(pid):
            return True
        time.sleep(0.05)
    return False
