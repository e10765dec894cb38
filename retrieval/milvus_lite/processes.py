"""What /proc tells of a process and a port: is it alive (and the same process), what it runs,
which sockets it listens on. The identity checks of the server's record read these (Linux only)."""

import os
import socket
from pathlib import Path

HOST = "127.0.0.1"  # never exposed beyond the machine: Milvus Lite has no authentication


def stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 3 (state) on; None when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    return raw[raw.rfind(")") + 2:].split()  # the command name (field 2) may hold spaces and ')'


def identity(pid: int) -> str | None:
    """`<pid>.<start time>` of a live process (a reused pid has another start time); None if gone."""
    fields = stat(pid)
    if fields is None or fields[0] in ("Z", "X"):  # a zombie has exited, only its parent has not reaped it
        return None
    return f"{pid}.{fields[19]}"


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [arg.decode(errors="replace") for arg in raw.split(b"\0")[:-1]]


def listening_inodes(port: int) -> set[str]:
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


def holds(pid: int, inodes: set[str]) -> bool:
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


def port_holder(port: int) -> str:
    """Who listens on `port`, for an error message."""
    inodes = listening_inodes(port)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and inodes and holds(int(entry.name), inodes):
            args = cmdline(int(entry.name))
            if len(args) >= 2 and Path(args[0]).name == "milvus" and "milvus_lite" in args[0]:
                return f"the Milvus Lite server of {args[1]} (pid {entry.name})"
            return f"another program (pid {entry.name}: {' '.join(args)[:200]})"
    return "another program (not visible to this user)"


def answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]
