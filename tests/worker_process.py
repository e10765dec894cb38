"""Real processes and throwaway server resources for the scale-out tests.

- `Worker`: a `celery -A loci worker` subprocess with a given environment, in its own process group,
  so `kill()` takes the pool children with it (as losing a machine would) and nothing outlives a test.
- `manage()`: one `manage.py` command in a subprocess with the same environment.
- `postgres_database()`, `redis_database()`, `rabbitmq_vhost()`: a fresh database / Redis db / vhost
  per test, removed afterwards, so tests never see each other's rows or tasks.
- `app_env()`: the environment every process of one scenario shares.
- `need_service()`: a test needing PostgreSQL, Redis or RabbitMQ skips without it, or fails under
  LOCI_REQUIRE_SERVICES=1 (what `.ci/run` sets: CI has all three, so a skip there would hide a test).

Everything here stops only what it started, by process group or pid.
"""

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from loci.supervision import DIE_WITH_PARENT
from tests.index_fixtures import free_port  # noqa: F401  (tests import it from here too)

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

PG_ADMIN_URL = os.environ.get("LOCI_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672"

# Inherited settings that would point a scenario somewhere else (a developer's own shell may set them).
_SCRUBBED_PREFIXES = ("DATABASE_URL", "DB_", "CELERY_", "MILVUS_", "OPENSEARCH_", "OPENAI_", "EMBEDDING_",
                      "RERANK_", "LOCI_", "LLM_", "LOG_", "DJANGO_SETTINGS_MODULE")


# Set by .ci/run: a missing service fails the tests that need it instead of skipping them.
REQUIRE_SERVICES = os.environ.get("LOCI_REQUIRE_SERVICES", "").strip().lower() in {"1", "true", "yes"}


def missing_service(reason: str) -> None:
    """Skip the test for want of a local service, or fail it when the services are required."""
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason}, and LOCI_REQUIRE_SERVICES=1 requires it", pytrace=False)
    pytest.skip(reason)


def need_service(what: str, host: str, port: int) -> None:
    if not reachable(host, port):
        missing_service(f"{what} is not reachable on {host}:{port}")


def need_rabbitmqctl() -> None:
    if not rabbitmqctl_available():
        missing_service("rabbitmqctl is needed to give the test a vhost of its own")


def reachable(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def with_parent(argv: list[str]) -> list[str]:
    """`argv` run through loci.die_with_parent (as `up` runs its children): the process gets SIGTERM
    when this test process dies, even by SIGKILL or an interrupted run, instead of living on with
    its port and its broker polling (killed runs used to leave web servers and workers behind).
    Linux sends it when the starting *thread* exits: start long-lived processes from the test's own."""
    return [PYTHON, str(DIE_WITH_PARENT), str(os.getpid()), *argv]


def app_env(var_dir: Path, **overrides: str) -> dict[str, str]:
    """The environment of every process in one scenario: its own var dir, media and Milvus Lite port.

    The embedding cache is the test's own (tests/conftest.py: this run's, or the warm one where a
    test asks for it), named explicitly: the var dir's default would start every scenario cold; so
    is the directory of converted models, which every scenario shares.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env.update(
        DJANGO_SETTINGS_MODULE="loci.settings",
        LOCI_VAR_DIR=str(var_dir),
        LOCI_MEDIA_ROOT=str(var_dir / "media"),
        EMBEDDING_CACHE_PATH=str(settings.EMBEDDING_CACHE_PATH),
        # The ONNX model converted once (the checkout's var/models), not once per scenario's var dir.
        LOCI_MODELS_DIR=str(settings.LOCI_MODELS_DIR),
        MILVUS_LITE_PORT=str(free_port()),
        # An idle worker looks for the next message 10 times a second, not once (the default): each
        # stage of a document otherwise waits up to a second for it (the 50-file upload: 154 s to 46 s).
        LOCI_BROKER_POLL_SECONDS="0.1",
        LLM_DISABLED="1",
        PYTHONUNBUFFERED="1",
    )
    env.update(overrides)
    return env


def manage(env: dict, *args: str, timeout: float = 180, expect_exit: int = 0) -> subprocess.CompletedProcess:
    """Run `manage.py <args>`; raise with its output if it exits otherwise than `expect_exit` or overruns."""
    proc = subprocess.Popen(with_parent([PYTHON, "manage.py", *args]), cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"manage.py {' '.join(args)} ran over {timeout}s\n{out}\n{err[-3000:]}") from None
    if proc.returncode != expect_exit:
        raise AssertionError(f"manage.py {' '.join(args)} exited {proc.returncode}\n{out}\n{err[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


INSTALL = """
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
for kb in {kbs!r}:
    call_command("bootstrap", tenant={tenant!r}, kb=kb)
"""


def install(env: dict, *kbs: str, tenant: str = "acme") -> None:
    """`manage.py migrate`, then `bootstrap --tenant <tenant> --kb <kb>` for each KB, in one process:
    each `manage.py` process takes seconds to start (Django and the app's imports)."""
    manage(env, "shell", "-c", INSTALL.format(kbs=list(kbs), tenant=tenant), timeout=300)


class Worker:
    """One `celery -A loci worker` process group, logging to a file."""

    def __init__(self, env: dict, log_path: Path, *, name: str = "w1", concurrency: int = 1):
        self.env, self.log_path, self.name, self.concurrency = env, Path(log_path), name, concurrency
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Worker":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                with_parent([PYTHON, "-m", "celery", "-A", "loci", "worker", "--loglevel", "INFO", "--pool", "prefork",
                             "--concurrency", str(self.concurrency), "--without-gossip", "--without-mingle",
                             "--without-heartbeat", "--hostname", f"{self.name}@%h"]),
                cwd=REPO, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def wait_ready(self, timeout: float = 90) -> "Worker":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(rf"{re.escape(self.name)}@\S+ ready\.", self.log()):
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"worker {self.name} exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            time.sleep(0.2)
        raise AssertionError(f"worker {self.name} not ready after {timeout}s:\n{self.log()[-4000:]}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        """SIGKILL the whole group: no warm shutdown, no acknowledgement, as if the machine died."""
        if self.proc is not None and self.proc.poll() is None:
            _kill_group(self.proc, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def pause(self) -> None:
        """SIGSTOP the whole group: a worker frozen mid-stage (swapped out, a VM paused), not dead."""
        _kill_group(self.proc, signal.SIGSTOP)

    def resume(self) -> None:
        _kill_group(self.proc, signal.SIGCONT)

    def stop(self, timeout: float = 20) -> None:
        """Warm shutdown (SIGTERM), then SIGKILL whatever is left of the group."""
        self.begin_stop()
        self.finish_stop(timeout)

    def begin_stop(self) -> None:
        """SIGTERM to the worker's main process only, as `up` stops it (loci/supervision.py): its warm
        shutdown ends its own pool. A SIGTERM to the whole group reached the pool children first; the
        main process then forked a replacement, which loaded the models (2.6 s) before it could stop."""
        if self.proc is not None and self.proc.poll() is None:
            _kill_group(self.proc, signal.SIGCONT)  # a paused worker cannot shut down
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)

    def finish_stop(self, timeout: float = 20) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        _kill_group(self.proc, signal.SIGKILL)  # pool children that outlived their parent
        self.proc.wait(timeout=30)


def _kill_group(proc: subprocess.Popen, sig) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # start_new_session=True: the group id is the leader's pid


@contextlib.contextmanager
def workers():
    """Collect Workers and stop every one of them at the end, whatever happened."""
    started: list[Worker] = []
    try:
        yield started
    finally:
        for worker in started:  # all at once: each warm shutdown takes seconds
            worker.begin_stop()
        for worker in started:
            worker.finish_stop(timeout=10)


# --- Throwaway server resources


@contextlib.contextmanager
def postgres_database():
    """A fresh PostgreSQL database, dropped afterwards (connections and all); yields its URL."""
    import psycopg

    name = f"loci_test_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def db_rows(url: str, sql: str, params=()) -> list[tuple]:
    """Rows of a query (`%s` placeholders) on a scenario's database: PostgreSQL, or the embedded
    SQLite file (`sqlite:///path`, read-only: the scenario's processes are its writers)."""
    if url.startswith("sqlite:///"):
        import sqlite3

        path = url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as conn:
            return conn.execute(sql.replace("%s", "?"), params).fetchall()
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()



@contextlib.contextmanager
def redis_database():
    """An empty Redis database number, claimed with a marker key and flushed afterwards; yields its URL."""
    import redis

    token = secrets.token_hex(8)
    for number in range(15, 0, -1):
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=number)
        if client.set("loci-test-claim", token, nx=True, ex=3600) and client.dbsize() == 1:
            break
        if client.get("loci-test-claim") == token.encode():
            client.delete("loci-test-claim")
    else:
        raise RuntimeError("no empty Redis database among 1..15")
    try:
        yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{number}"
    finally:
        client.flushdb()
        client.close()


def rabbitmqctl_available() -> bool:
    return shutil.which("rabbitmqctl") is not None


@contextlib.contextmanager
def rabbitmq_vhost():
    """A fresh RabbitMQ vhost for guest, deleted afterwards (queues and all); yields the broker URL."""
    name = f"loci_test_{secrets.token_hex(4)}"
    _rabbitmqctl("add_vhost", name)
    try:
        _rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        yield f"{RABBITMQ_URL}/{name}"
    finally:
        _rabbitmqctl("delete_vhost", name)


def _rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


def stop_milvus_lite(var_dir: Path) -> None:
    """Stop the Milvus Lite server a scenario's processes started over var_dir/milvus.db (by its record)."""
    from retrieval.milvus_lite import stop_server

    if (var_dir / "milvus.db").exists() or (var_dir / ".milvus.db.server.json").exists():
        stop_server(var_dir / "milvus.db")
