"""The embedded Milvus Lite server: one process per data file, reached only by its own installation.

Milvus Lite locks its data file to a single process, so no Loci process opens the file itself.
`ensure_server` starts `python -m retrieval.milvus_lite serve` (once: a file lock serialises
concurrent starters) and every process then connects with a MilvusClient as it would to a cluster.

Identity. Milvus Lite has no authentication and answers anyone on its port, so a port that answers
proves nothing: two installations on one port once shared a server, and deleting a document in one
deleted the other's vectors. `serve` records {path, port, pid, milvus_pid} in `.<db>.server.json`
next to the data file, and a client trusts the record only when /proc shows that the milvus binary
it names is a child of that serve process, was started over this very file on that port, and holds
the socket listening there. With no port configured a free one is picked (and reused next time if
it is still free); a configured port held by anything else is an error naming both files.

Lifetime. Every process that uses the server registers in `.<db>.users/` (pid and start time, so a
reused pid does not count). The server stops when none of them is alive any more, and a process
that exits normally stops it at once if it was the last. So a management command that started it
stops it at exit, `up` stops it after its children, a SIGKILLed user leaves it running for about a
second, and the milvus binary dies with its serve process (PR_SET_PDEATHSIG) even if that is killed.
The identity and lifetime checks read /proc, so the embedded server needs Linux.
"""

import argparse
import atexit
import contextlib
import fcntl
import json
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
USERS_POLL = 1.0  # seconds between a server's checks that some user is still alive
START_ATTEMPTS = 3  # free ports tried when none is configured (another program may take one first)
_children: list[subprocess.Popen] = []  # kept so a started server is reaped, not left a zombie
_release_registered: set[tuple[int, Path]] = set()  # (pid, path): an atexit release is registered


# --- /proc: who is alive, what they run, which sockets they hold

def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 3 (state) on; None when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    return raw[raw.rfind(")") + 2:].split()  # the command name (field 2) may hold spaces and ')'


def _identity(pid: int) -> str | None:
    """`<pid>.<start time>` of a live process (a reused pid has another start time); None if gone."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):  # a zombie has exited, only its parent has not reaped it
        return None
    return f"{pid}.{fields[19]}"


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [arg.decode(errors="replace") for arg in raw.split(b"\0")[:-1]]


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the sockets listening on `port` (IPv4, or IPv6 which covers v4-mapped addresses)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(fields[9])
    return inodes


def _holds(pid: int, inodes: set[str]) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


def _port_holder(port: int) -> str:
    """Who listens on `port`, for an error message."""
    inodes = _listening_inodes(port)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and inodes and _holds(int(entry.name), inodes):
            args = _cmdline(int(entry.name))
            if len(args) >= 2 and Path(args[0]).name == "milvus" and "milvus_lite" in args[0]:
                return f"the Milvus Lite server of {args[1]} (pid {entry.name})"
            return f"another program (pid {entry.name}: {' '.join(args)[:200]})"
    return "another program (not visible to this user)"


def _answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# --- the files next to the data file

def _files(path: Path) -> dict[str, Path]:
    names = ("start-lock", "log", "server.json", "users", "port")
    return {name: path.parent / f".{path.name}.{name}" for name in names}


def _check_path(path) -> Path:
    path = Path(path).resolve()
    # Milvus Lite's own limits on the file name; checked here to fail with the reason, not a timeout.
    if len(path.name) > 36 or not all(c.isalnum() or c in ".-_" for c in path.name):
        raise ValueError(f"Milvus Lite file name {path.name!r} must be at most 36 chars of [A-Za-z0-9._-]")
    return path


def _is_serve(pid: int, path: Path) -> bool:
    args = _cmdline(pid)
    return "retrieval.milvus_lite" in args and "serve" in args and "--path" in args \
        and args[args.index("--path") + 1:args.index("--path") + 2] == [str(path)]


def _running(path: Path) -> dict | None:
    """The record of the server over `path` if it verifiably serves `path` now; else None."""
    try:
        record = json.loads(_files(path)["server.json"].read_text())
        pid, milvus_pid, port = int(record["pid"]), int(record["milvus_pid"]), int(record["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    milvus = _stat(milvus_pid)
    if (record.get("path") != str(path) or milvus is None or milvus[1] != str(pid) or not _identity(pid)
            or not _is_serve(pid, path) or _cmdline(milvus_pid)[1:3] != [str(path), f"{HOST}:{port}"]):
        return None
    return record if _holds(milvus_pid, _listening_inodes(port)) else None


# --- users

def _register(users: Path) -> None:
    users.mkdir(exist_ok=True)
    (users / _identity(os.getpid())).touch()


def _live_users(users: Path) -> list[str]:
    """Identities of the registered processes still alive; the others' entries are removed."""
    try:
        entries = os.listdir(users)
    except FileNotFoundError:
        return []
    alive = []
    for entry in entries:
        pid = entry.split(".", 1)[0]
        if pid.isdigit() and _identity(int(pid)) == entry:
            alive.append(entry)
        else:
            (users / entry).unlink(missing_ok=True)
    return alive


@contextlib.contextmanager
def _start_lock(path: Path):
    with open(_files(path)["start-lock"], "a") as lock:
        # Web and worker processes may all arrive here at boot; the first starts the server, the
        # others wait on the lock and then find its record. A server deciding it is unused takes it too.
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# --- the client side

def ensure_server(path, port: int | None = None, *, timeout: float = 60.0) -> str:
    """The URI of the Milvus Lite server over `path`, started if none serves it; this process becomes a user.

    `port` None (or 0) takes the port a running server has, else a free one. A given port that
    something other than this file's server holds raises RuntimeError naming both, rather than
    connecting to it.
    """
    path = _check_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    files = _files(path)
    with _start_lock(path):
        _register(files["users"])  # before the check: a server that sees no user left stops
        record = _running(path) or _start(path, port or None, files, timeout)
    key = (os.getpid(), path)
    if key not in _release_registered:
        _release_registered.add(key)
        atexit.register(release, path)
    return f"http://{HOST}:{record['port']}"


def _start(path: Path, port: int | None, files: dict[str, Path], timeout: float) -> dict:
    if port and _answers(port):
        raise RuntimeError(
            f"Milvus Lite port {port} (MILVUS_LITE_PORT) is held by {_port_holder(port)}, which cannot be "
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
        if 1024 <= last <= 65535 and not _answers(last):
            ports.append(last)
    while len(ports) < START_ATTEMPTS:
        ports.append(_free_port())
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
        record = _running(path)
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
    path = _check_path(path)
    files = _files(path)
    identity = _identity(os.getpid())
    if identity:
        (files["users"] / identity).unlink(missing_ok=True)
    if not files["start-lock"].parent.is_dir():
        return False
    with _start_lock(path):
        if _live_users(files["users"]):
            return False
        return _stop(path, files, timeout)


def stop_server(path, *, timeout: float = 10.0) -> bool:
    """Stop the server over `path` whoever uses it; False if none was running."""
    path = _check_path(path)
    if not path.parent.is_dir():
        return False
    with _start_lock(path):
        return _stop(path, _files(path), timeout)


def _stop(path: Path, files: dict[str, Path], timeout: float) -> bool:
    try:
        pid = int(json.loads(files["server.json"].read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not _identity(pid) or not _is_serve(pid, path):  # a stale record whose pid is gone or now someone else's
        files["server.json"].unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in _children:
            child.poll()  # reap our own child, or it stays a zombie
        if not _identity(pid):
            return True
        time.sleep(0.05)
    return False


# --- the server side

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
    if _live_users(files["users"]):
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

    path = _check_path(path)
    files = _files(path)

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
        while not _holds(binary.pid, _listening_inodes(port)):
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m retrieval.milvus_lite")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="run the Milvus Lite server in the foreground")
    run.add_argument("--path", required=True, help="Milvus Lite data file, e.g. var/milvus.db")
    run.add_argument("--port", type=int, required=True)
    run.add_argument("--until-unused", action="store_true", help="stop when no registered user process is alive")
    halt = commands.add_parser("stop", help="stop the server over a data file, whoever uses it")
    halt.add_argument("--path", required=True)
    args = parser.parse_args(argv)
    if args.command == "stop":
        return 0 if stop_server(args.path) else 1
    return serve(args.path, args.port, until_unused=args.until_unused)


if __name__ == "__main__":
    sys.exit(main())
