"""The files beside a data file: the server's record (and whether it verifiably serves that file now),
the users' registry (who still uses the server), the start lock and the log."""

import contextlib
import fcntl
import json
import os
from pathlib import Path

from retrieval.milvus_lite.processes import HOST, cmdline, holds, identity, listening_inodes, stat


def files_of(path: Path) -> dict[str, Path]:
    names = ("start-lock", "log", "server.json", "users", "port")
    return {name: path.parent / f".{path.name}.{name}" for name in names}


def check_path(path) -> Path:
    path = Path(path).resolve()
    # Milvus Lite's own limits on the file name; checked here to fail with the reason, not a timeout.
    if len(path.name) > 36 or not all(c.isalnum() or c in ".-_" for c in path.name):
        raise ValueError(f"Milvus Lite file name {path.name!r} must be at most 36 chars of [A-Za-z0-9._-]")
    return path


def is_serve(pid: int, path: Path) -> bool:
    args = cmdline(pid)
    return "retrieval.milvus_lite" in args and "serve" in args and "--path" in args \
        and args[args.index("--path") + 1:args.index("--path") + 2] == [str(path)]


def running(path: Path) -> dict | None:
    """The record of the server over `path` if it verifiably serves `path` now; else None."""
    try:
        record = json.loads(files_of(path)["server.json"].read_text())
        pid, milvus_pid, port = int(record["pid"]), int(record["milvus_pid"]), int(record["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    milvus = stat(milvus_pid)
    if (record.get("path") != str(path) or milvus is None or milvus[1] != str(pid) or not identity(pid)
            or not is_serve(pid, path) or cmdline(milvus_pid)[1:3] != [str(path), f"{HOST}:{port}"]):
        return None
    return record if holds(milvus_pid, listening_inodes(port)) else None


def register(users: Path) -> None:
    users.mkdir(exist_ok=True)
    (users / identity(os.getpid())).touch()


def live_users(users: Path) -> list[str]:
    """Identities of the registered processes still alive; the others' entries are removed."""
    try:
        entries = os.listdir(users)
    except FileNotFoundError:
        return []
    alive = []
    for entry in entries:
        pid = entry.split(".", 1)[0]
        if pid.isdigit() and identity(int(pid)) == entry:
            alive.append(entry)
        else:
            (users / entry).unlink(missing_ok=True)
    return alive


@contextlib.contextmanager
def start_lock(path: Path):
    with open(files_of(path)["start-lock"], "a") as lock:
        # Web and worker processes may all arrive here at boot; the first starts the server, the
        # others wait on the lock and then find its record. A server deciding it is unused takes it too.
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
