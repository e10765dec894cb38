"""`manage.py up` keeps Loci running when its workers die or stop, and nothing of it outlives it.

One real `up` (web server, two workers, the embedded indexes, the filesystem broker) through:
- every idle process that runs tasks SIGKILLed (under a prefork pool its children: the pool then
  wedged on its pipe's read lock and a new document stayed `queued` for good, issue 30): a new
  document still ends `ready`, and /healthz names the workers and their restarts;
- every worker's main process SIGKILLed: the web server keeps answering throughout (it used to be
  stopped with them), the workers are started again and finish the next document;
- a worker frozen (SIGSTOP): its heartbeat goes stale, /healthz says so, and `up` kills and restarts it;
- `up` itself SIGKILLed: its children die with it (parent-death signal) and the port is free again;
- and a port held by a stale server: `up` refuses it and names the process holding it.
"""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from tests.worker_process import PYTHON, REPO, app_env, free_port, install, manage, stop_milvus_lite

DOCUMENT_SECONDS = 150  # a document's three stages, a worker restart included, on a loaded 2-core machine


def descendants(pid: int) -> dict[int, tuple[int, str]]:
    """Every live process under `pid`: {pid: (parent pid, command line)}."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        table[int(entry)] = (int(fields[1]), cmdline)
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, cmdline) in table.items():
            if ppid == parent and child not in found:
                found[child] = (ppid, cmdline)
                frontier.append(child)
    return found


def celery_processes(up_pid: int) -> tuple[list[int], list[int]]:
    """(worker main processes, processes that run tasks) under `up`: the same pids for a solo worker,
    the pool's children for a prefork one."""
    tree = descendants(up_pid)
    celery = {pid for pid, (_, cmd) in tree.items() if "celery" in cmd and "worker" in cmd}
    mains = [pid for pid in celery if tree[pid][0] not in celery]
    leaves = [pid for pid in celery if not any(tree[other][0] == pid for other in celery)]
    return sorted(mains), sorted(leaves)


def health(port: int) -> dict:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=20) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:  # 503 is the server answering too
        return json.loads(exc.read())


def status_of(var, name: str) -> str | None:
    with sqlite3.connect(f"file:{var / 'loci.sqlite3'}?mode=ro", uri=True, timeout=10) as db:
        row = db.execute("SELECT status FROM memory_document WHERE filename = ?", (name,)).fetchone()
    return row[0] if row else None


def ingest_and_wait(env, var, tmp_path, name: str, port: int, timeout: float = DOCUMENT_SECONDS) -> float:
    """Ingest a small new file, then wait for it to end, asking /healthz every poll (it must answer)."""
    path = tmp_path / name
    path.write_text(f"{name}: the lighthouse keeper logs the weather at {name} every morning.\n" * 3)
    started = time.monotonic()
    manage(env, "ingest", str(path), "--tenant", "acme", "--kb", "docs")
    while time.monotonic() - started < timeout:
        health(port)  # raises if the web server stopped answering
        status = status_of(var, name)
        if status in ("ready", "failed"):
            assert status == "ready", status
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"{name} is still {status_of(var, name)!r} after {timeout}s")


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout}s: {what}")


def read_log(path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


@pytest.mark.slow
def test_up_restarts_killed_and_stuck_workers_while_the_web_server_keeps_serving(tmp_path):
    var, port = tmp_path / "var", free_port()
    env = app_env(var, LOCI_PORT=str(port), LOCI_STAGE_LEASE_SECONDS="6", LOCI_SWEEP_INTERVAL_SECONDS="2",
                  LOCI_STALLED_QUEUE_SECONDS="30", LOCI_WORKER_HEARTBEAT_SECONDS="1", LOCI_WORKER_STALE_SECONDS="8")
    install(env, "docs")
    log = tmp_path / "up.log"
    with open(log, "wb") as out:
        up = subprocess.Popen([PYTHON, "manage.py", "up", "--concurrency", "2"], cwd=REPO, env=env,
                              stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: "Loci is up" in read_log(log) or up.poll() is not None, 240, "up is up")
        assert up.poll() is None, read_log(log)
        wait_until(lambda: read_log(log).count(" ready.") >= 1, 240, "a worker is ready")
        ingest_and_wait(env, var, tmp_path, "first.txt", port, timeout=300)  # loads the models

        # 1. Every idle process that runs tasks, SIGKILLed.
        _, runners = celery_processes(up.pid)
        assert runners, descendants(up.pid)
        for pid in runners:
            os.kill(pid, signal.SIGKILL)
        took = ingest_and_wait(env, var, tmp_path, "after-idle-kill.txt", port)
        body = health(port)
        assert body["workers_live"] >= 1, body
        assert {w["hostname"].split("@")[0] for w in body["workers"]} == {"worker1", "worker2"}, body
        assert sum(p["restarts"] for p in body["processes"] if p["name"].startswith("worker")) >= len(runners), body
        print(f"\nidle task runners killed: {len(runners)}; the next document ready {took:.1f}s later")

        # 2. Every worker's main process SIGKILLed: the web server is not stopped with them.
        mains, _ = celery_processes(up.pid)
        web = [pid for pid, (_, cmd) in descendants(up.pid).items() if "uvicorn" in cmd]
        for pid in mains:
            os.kill(pid, signal.SIGKILL)
        body = wait_until(lambda: _down_or_restarting(health(port)), 20,
                          "/healthz says the workers are down or restarting")
        took = ingest_and_wait(env, var, tmp_path, "after-main-kill.txt", port)
        assert [pid for pid, (_, cmd) in descendants(up.pid).items() if "uvicorn" in cmd] == web  # never restarted
        print(f"worker main processes killed: {len(mains)}; /healthz meanwhile: restarting={body.get('restarting')}, "
              f"workers_live={body.get('workers_live')}; the next document ready {took:.1f}s later")

        # 3. A worker frozen: stale heartbeat, then killed and started again by up.
        mains, _ = celery_processes(up.pid)
        frozen = mains[0]
        os.kill(frozen, signal.SIGSTOP)
        # up kills it as soon as it is stale, so /healthz may see it stale, or already killed (gone, restarting).
        seen = wait_until(lambda: [w for w in health(port).get("workers", []) if w["pid"] == frozen
                                   and w["status"] in ("stale", "gone")], 30,
                          "/healthz says the frozen worker is stale")
        wait_until(lambda: frozen not in celery_processes(up.pid)[0] and len(celery_processes(up.pid)[0]) == 2, 60,
                   "up restarts the frozen worker")
        assert "sent no heartbeat" in read_log(log)
        ingest_and_wait(env, var, tmp_path, "after-freeze.txt", port)
        print(f"frozen worker: {seen[0]['status']} after {seen[0]['beat_age_s']}s without a beat, restarted by up")

        # 4. up SIGKILLed: nothing of it stays.
        children = descendants(up.pid)
        os.kill(up.pid, signal.SIGKILL)
        up.wait(timeout=10)
        wait_until(lambda: not any(os.path.exists(f"/proc/{pid}") and _alive(pid) for pid in children), 60,
                   f"every child of up exits after up is killed: {children}")
        assert _port_free(port)
    finally:
        left = descendants(up.pid) if up.poll() is None else {}
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGTERM)
            try:
                up.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
        for pid in left:  # this scenario's own processes, should any have outlived up
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        stop_milvus_lite(var)
    output = read_log(log)
    assert "Traceback" not in output.split("Loci is up")[0], output[-3000:]


def _down_or_restarting(body: dict) -> dict | None:
    return body if body.get("restarting") or body.get("workers_live") == 0 else None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def test_up_refuses_a_port_held_by_a_stale_server_and_names_it(tmp_path):
    port = free_port()
    holder = subprocess.Popen([PYTHON, "-c", "import socket, time\ns = socket.socket()\n"
                               f"s.bind(('127.0.0.1', {port})); s.listen(); print('listening', flush=True)\n"
                               "time.sleep(120)"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "listening"
        env = app_env(tmp_path / "var", LOCI_PORT=str(port))
        manage(env, "migrate", "--no-input", "-v", "0")
        result = subprocess.run([PYTHON, "manage.py", "up"], check=False, cwd=REPO, env=env, capture_output=True,
                                text=True,
                                timeout=120)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode != 0, result.stdout
    assert "Loci is up" not in result.stdout
    assert f"Port {port}" in result.stderr and f"pid {holder.pid}" in result.stderr, result.stderr
    assert "LOCI_PORT" in result.stderr


def test_a_solo_worker_stops_a_task_at_the_soft_time_limit(settings, monkeypatch, tmp_path):
    """The solo pool enforces no time limit of its own: the heartbeat's task hooks arm one (SIGALRM)."""
    from celery.exceptions import SoftTimeLimitExceeded

    from ingest import worker_liveness
    from ingest.tasks import process_document_stage

    settings.LOCI_RUN_DIR = tmp_path
    settings.CELERY_TASK_SOFT_TIME_LIMIT = 0.3
    monkeypatch.setattr(worker_liveness, "_solo_pid", os.getpid())
    monkeypatch.setattr(worker_liveness, "_state", {"hostname": "worker1@test", "state": "idle"})
    started = time.monotonic()
    with pytest.raises(SoftTimeLimitExceeded):
        worker_liveness.on_task_prerun(task=process_document_stage, args=(1, "parse"))
        assert json.loads((tmp_path / "workers" / "worker1@test.json").read_text())["state"] == "busy"
        while time.monotonic() - started < 10:  # a stage that never ends on its own
            pass
    worker_liveness.on_task_postrun()
    assert time.monotonic() - started < 5
    assert json.loads((tmp_path / "workers" / "worker1@test.json").read_text())["state"] == "idle"
