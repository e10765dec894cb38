"""The embedded Milvus Lite server: one per installation, reached only by its own installation, stopped with it.

Real processes throughout: two installations side by side in this process, and `manage.py up` and
management commands as subprocesses, each over its own var dir. "No server left" is read from /proc:
no `retrieval.milvus_lite serve` and no milvus binary whose command line names the data file.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from retrieval.backends.base import IndexFilter, IndexRow
from tests.worker_process import PYTHON, REPO, app_env, free_port, install, manage

DIM = 8


def lite_processes(path: Path) -> list[str]:
    """Command lines of the live processes serving `path` (the serve wrapper and the milvus binary)."""
    wanted, found = str(path.resolve()), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted.encode() in args and any(b"milvus" in a for a in args):
            found.append(" ".join(a.decode(errors="replace") for a in args))
    return found


def wait_until_gone(path: Path, timeout: float = 15.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := lite_processes(path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def installation(root: Path, **options):
    from retrieval.backends.milvus import MilvusVectorIndex

    return MilvusVectorIndex({"uri": "", "lite_path": str(root / "milvus.db"), "index_type": "IVF_FLAT", **options})


def row(name: str) -> IndexRow:
    return IndexRow(id=f"chunk:{name}", tenant_id=1, kb_id=1, kind="chunk", document_id=1, vector=[1.0] * DIM)


EVERYTHING = IndexFilter(tenant_id=1, kb_ids=(1,))


@pytest.fixture
def installations(tmp_path):
    """Two installations' var dirs; whatever servers they start are stopped afterwards."""
    from retrieval.milvus_lite import stop_server

    roots, indexes = [tmp_path / "x", tmp_path / "y"], []
    yield roots, indexes
    for index in indexes:
        index.close()
    for root in roots:
        stop_server(root / "milvus.db")


def test_two_installations_on_the_default_port_keep_their_own_vectors(installations):
    (x_root, y_root), indexes = installations
    x, y = installation(x_root), installation(y_root)  # no port configured: the default
    indexes += [x, y]
    x.upsert([row("x")])
    y.upsert([row("y")])

    assert [h.id for h in x.search([1.0] * DIM, EVERYTHING, 10)] == ["chunk:x"]
    assert [h.id for h in y.search([1.0] * DIM, EVERYTHING, 10)] == ["chunk:y"]
    assert y.delete(EVERYTHING) == 1  # the measured fault: Y's delete emptied X
    assert x.count(EVERYTHING) == 1 and [h.id for h in x.search([1.0] * DIM, EVERYTHING, 10)] == ["chunk:x"]
    assert y.count(EVERYTHING) == 0


def test_a_port_held_by_another_installations_server_is_refused_naming_both_files(installations):
    (x_root, y_root), indexes = installations
    port = free_port()
    x, y = installation(x_root, lite_port=port), installation(y_root, lite_port=port)
    indexes += [x, y]
    x.upsert([row("x")])

    with pytest.raises(RuntimeError) as refused:
        y.delete(EVERYTHING)
    message = str(refused.value)
    assert str(port) in message and str(x_root / "milvus.db") in message and str(y_root / "milvus.db") in message
    assert x.count(EVERYTHING) == 1  # nothing of Y reached X's server


def test_a_stale_record_whose_server_was_killed_is_not_trusted(installations):
    from retrieval.milvus_lite import ensure_server

    (x_root, _), indexes = installations
    x = installation(x_root)
    indexes.append(x)
    x.upsert([row("x")])
    x.close()
    ensure_server(x_root / "milvus.db")
    for pid in [int(line.split()[0]) for line in _pids(x_root / "milvus.db")]:
        os.kill(pid, signal.SIGKILL)  # serve and binary, as an OOM kill of both would
    assert not wait_until_gone(x_root / "milvus.db")

    uri = ensure_server(x_root / "milvus.db")  # the record still names the dead server: a new one starts
    assert lite_processes(x_root / "milvus.db")
    # Its port again is best effort (the killed binary's socket may linger): not asserted.
    assert uri.startswith("http://127.0.0.1:")
    assert x.count(EVERYTHING) == 1


def test_a_file_another_server_holds_is_never_opened_twice(tmp_path):
    """A server this code cannot verify (an older version's, say) holds the file: starting fails, and the lock stays."""
    from retrieval.milvus_lite import ensure_server

    lock_file = tmp_path / ".milvus.db.lock"
    holder = subprocess.Popen([PYTHON, "-c", f"import fcntl, sys, time; f = open({str(lock_file)!r}, 'a'); "
                               "fcntl.lockf(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        inode = lock_file.stat().st_ino
        with pytest.raises(RuntimeError, match="another Milvus Lite server holds"):
            ensure_server(tmp_path / "milvus.db", timeout=20)
        assert lock_file.stat().st_ino == inode  # Milvus Lite's Server.__del__ unlinked it: a 2nd start then succeeded
        assert not lite_processes(tmp_path / "milvus.db")
    finally:
        holder.kill()
        holder.wait()


def _pids(path: Path) -> list[str]:
    wanted, found = str(path.resolve()).encode(), []
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        if wanted in args and any(b"milvus" in a for a in args):
            found.append(f"{entry.name} {args[0].decode()}")
    return found


# --- lifetimes: real `manage.py` processes over one migrated var dir

@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """A migrated installation with one tenant; its Milvus Lite port is free and explicit."""
    var = tmp_path_factory.mktemp("installation")
    env = app_env(var, LOCI_VECTOR_BACKEND="retrieval.backends.milvus.MilvusVectorIndex")  # the server is what is tested
    install(env, "docs")
    yield var, env
    from retrieval.milvus_lite import stop_server

    stop_server(var / "milvus.db")


@pytest.mark.slow
def test_up_stopped_by_sigterm_leaves_no_milvus_lite_server(app):
    var, env = app
    assert not wait_until_gone(var / "milvus.db")
    up = subprocess.Popen([PYTHON, "manage.py", "up", "--no-worker", "--port", str(free_port())], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        for line in up.stdout:
            if "Loci is up" in line:
                break
        else:
            raise AssertionError(f"up exited {up.wait()} before it was up")
        serving = lite_processes(var / "milvus.db")
        assert serving, "up did not start the Milvus Lite server"
        manage(env, "reconcile", "--tenant", "acme")  # a command beside up uses up's server, and leaves it
        assert lite_processes(var / "milvus.db") == serving
        up.send_signal(signal.SIGTERM)  # to up alone, as systemd or `docker stop` would
        assert up.wait(timeout=30) == 0
        assert not wait_until_gone(var / "milvus.db", timeout=10)
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_command_that_started_the_server_stops_it_at_exit(app):
    var, env = app
    assert not wait_until_gone(var / "milvus.db")
    report = manage(env, "reconcile", "--tenant", "acme").stdout  # reads the vector index: starts the server
    assert '"vector"' in report
    assert not wait_until_gone(var / "milvus.db", timeout=3)


@pytest.mark.slow
def test_a_killed_command_leaves_no_server_behind(app):
    var, env = app
    assert not wait_until_gone(var / "milvus.db")
    code = "from retrieval.backends import vector_index; vector_index().ping(); print('up', flush=True); " \
           "import time; time.sleep(120)"
    shell = subprocess.Popen([PYTHON, "manage.py", "shell", "-c", code], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for line in shell.stdout:  # after Django's shell banner
            if line.strip() == "up":
                break
        else:
            raise AssertionError(f"the command exited {shell.wait()} before reaching the index")
        assert lite_processes(var / "milvus.db")
        os.killpg(shell.pid, signal.SIGKILL)  # no atexit runs: the server must notice on its own
        shell.wait()
        assert not wait_until_gone(var / "milvus.db", timeout=10)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
