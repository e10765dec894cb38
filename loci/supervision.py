"""`up`'s children: start each so it dies with `up`, restart a crashed or stuck one with back-off, say so.

A child is a `ChildSpec` (a name, a command, and for a worker the Celery hostname its heartbeat is
filed under). One child's death never stops the others (issue 30: a SIGKILL of the worker used to
stop the web server too); only `up`'s own Ctrl-C/SIGTERM stops everything. Every change is written to
LOCI_RUN_DIR/up.json, which /healthz reads to say what runs and what is restarting.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# Back-off between restarts of one child: 1, 2, 4 … s, at most this; a child that then ran for
# STABLE_SECONDS starts again from 1 s.
MAX_BACKOFF_SECONDS = 60.0
STABLE_SECONDS = 60.0
RUNNING, RESTARTING, STOPPED = "running", "restarting", "stopped"


@dataclass(frozen=True)
class ChildSpec:
    name: str
    command: list[str]
    worker_hostname: str | None = None  # a Celery worker: judged by its heartbeat file too


@dataclass
class Child:
    spec: ChildSpec
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff: float = 1.0
    restart_at: float | None = None
    last_exit: str | None = None
    history: list = field(default_factory=list)

    @property
    def state(self) -> str:
        if self.proc is not None and self.proc.poll() is None:
            return RUNNING
        return RESTARTING if self.restart_at is not None else STOPPED

    def describe(self, now: float) -> dict:
        out = {"name": self.spec.name, "state": self.state, "pid": self.proc.pid if self.state == RUNNING else None,
               "restarts": self.restarts, "last_exit": self.last_exit}
        if self.restart_at is not None:
            out["restart_in_s"] = round(max(0.0, self.restart_at - now), 1)
        return out


# Run as a file, not `-m loci.die_with_parent`: importing the `loci` package makes the Celery app
# (0.1-0.15 CPU-s before every child, against 0.02 for the file alone).
DIE_WITH_PARENT = Path(__file__).with_name("die_with_parent.py")


def spawn(spec: ChildSpec, **popen_kwargs) -> subprocess.Popen:
    """Start the child in a session of its own (Ctrl-C reaches only `up`, which stops them in order),
    through loci.die_with_parent, so it gets SIGTERM if `up` dies without stopping it."""
    command = [sys.executable, str(DIE_WITH_PARENT), str(os.getpid()), *spec.command]
    return subprocess.Popen(command, start_new_session=True, **popen_kwargs)


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}"
    return f"exit {returncode}"


class Supervisor:
    def __init__(self, specs: list[ChildSpec], state_path: Path, *, is_stuck=None, on_restart=None, log=print):
        self.children = [Child(spec) for spec in specs]
        self.state_path = Path(state_path)
        self.is_stuck = is_stuck or (lambda child: None)  # returns a reason when a running child must be killed
        self.on_restart = on_restart or (lambda child: None)
        self.log = log

    def start_all(self) -> None:
        for child in self.children:
            self._start(child)
        self.write_state()

    def _start(self, child: Child) -> None:
        child.proc = spawn(child.spec)
        child.started_at = time.monotonic()
        child.restart_at = None

    def check(self) -> bool:
        """Restart what exited (after its back-off), kill what is stuck; True when anything changed."""
        now, changed = time.monotonic(), False
        for child in self.children:
            if child.state == RUNNING:
                reason = self.is_stuck(child)
                if reason:
                    self.log(f"{child.spec.name} (pid {child.proc.pid}) {reason}; killing it to start it again")
                    kill_group(child.proc, signal.SIGKILL)
                    child.proc.wait()
                    self._exited(child, f"killed: {reason}", now)
                    changed = True
            elif child.restart_at is None and child.proc is not None:
                self._exited(child, describe_exit(child.proc.returncode), now)
                changed = True
            if child.restart_at is not None and now >= child.restart_at:
                self.on_restart(child)
                self._start(child)
                self.log(f"{child.spec.name}: started again (pid {child.proc.pid}, restart {child.restarts})")
                changed = True
        if changed:
            self.write_state()
        return changed

    def _exited(self, child: Child, how: str, now: float) -> None:
        # The group too: a worker's pool processes, or anything else the child left behind.
        kill_group(child.proc, signal.SIGKILL)
        if now - child.started_at >= STABLE_SECONDS:
            child.backoff = 1.0
        child.last_exit = how
        child.restarts += 1
        child.restart_at = now + child.backoff
        self.log(f"{child.spec.name} exited ({how}); starting it again in {child.backoff:g}s "
                 "(the other processes keep running)")
        child.backoff = min(MAX_BACKOFF_SECONDS, child.backoff * 2)

    def stop_all(self, timeout: float) -> None:
        """SIGTERM to each child's main process (a worker's warm shutdown ends its own pool), then
        SIGKILL to the group of whatever is still there after `timeout` s."""
        for child in self.children:
            child.restart_at = None
            if child.proc is not None and child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in self.children:
            if child.proc is None:
                continue
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_group(child.proc, signal.SIGKILL)
                child.proc.wait()
        self.write_state(stopped=True)

    def write_state(self, stopped: bool = False) -> None:
        now = time.monotonic()
        record = {"pid": os.getpid(), "machine": socket.gethostname(), "written_at": time.time(),
                  "stopped": stopped, "children": [child.describe(now) for child in self.children]}
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(f".{self.state_path.name}.tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.state_path)


def kill_group(proc: subprocess.Popen, sig) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # start_new_session: the group id is the child's pid


def read_state(path: Path) -> dict | None:
    """up.json if the `up` that wrote it is alive (on this machine), else None."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if record.get("stopped") or record.get("machine") != socket.gethostname():
        return None
    try:
        os.kill(record["pid"], 0)
    except ProcessLookupError:
        return None
    except (PermissionError, KeyError, TypeError):
        pass
    return record


# --- A port someone else holds


def port_holder(host: str, port: int) -> str | None:
    """None if `port` can be bound on `host`; else who holds it ("pid 123: python -m uvicorn …" when /proc says)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no holder
        try:
            probe.bind((host, port))
            return None
        except OSError:
            pass
    return _listener(port) or "another program (its process is not visible to this user)"


def _listener(port: int) -> str | None:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                parts = line.split()
                if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(f"socket:[{parts[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                        return f"pid {proc.name}: {cmdline.strip()[:200]}"
    return None
