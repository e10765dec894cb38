import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from conversations import reflection_timer
from ingest import worker_liveness
from ingest.sweeper import start_sweeper
from conversations.job_sweeper import start_job_sweeper
from common import metrics
from common.llm import OPENAI_DEFAULT_URL
from loci.supervision import ChildSpec, Supervisor, port_holder
from retrieval.backends import index_upgrade
from retrieval.backends import local_servers
from retrieval.embeddings import identity
from retrieval.projection import refill_empty_keyword_index
from tenants.forwarded import untrusted_forwarding_notice

ALL_INTERFACES = ("0.0.0.0", "::", "")
STARTUP_SECONDS = 120  # the web server imports Django and the apps before it listens
STOP_SECONDS = 20
SUPERVISE_SECONDS = 0.5
STATE_EVERY_SECONDS = 5
# A worker that has not written its first heartbeat this long after it started is started again.
WORKER_START_SECONDS = 180


class Command(BaseCommand):
    help = ("Start the web server and Celery workers together (and an index's local server, such as Milvus Lite, "
            "when selected), restart any that crashes or stops making progress; Ctrl-C or SIGTERM stops all of them.")

    def add_arguments(self, parser):
        parser.add_argument("--host", default=settings.LOCI_HOST, help="default: LOCI_HOST")
        parser.add_argument("--port", type=int, default=settings.LOCI_PORT, help="default: LOCI_PORT")
        parser.add_argument("--concurrency", type=int, default=settings.LOCI_WORKER_CONCURRENCY,
                            help="worker processes (each runs one task at a time); default: LOCI_WORKER_CONCURRENCY")
        parser.add_argument("--no-worker", action="store_true")
        parser.add_argument("--sign-in-as", metavar="USER",
                            help="print 'Sign in as USER / <password>' with the address, when the password in "
                                 "DEMO_PASSWORD (the environment, not the command line: `ps` shows that) is USER's")

    def handle(self, *args, **opts):
        self.stdout.write(f"Data: {settings.VAR_DIR} (LOCI_VAR_DIR)")
        self.stdout.write(llm_line())
        holder = port_holder(opts["host"], opts["port"])
        if holder:  # a web server left running by an earlier `up` (killed with -9) would answer in ours' place
            raise CommandError(f"Port {opts['port']} on {opts['host']} is already in use by {holder}. "
                               "Stop that process (a Loci left running by an earlier `make run`?) "
                               "or choose another port with LOCI_PORT.")
        notice = identity.notice()  # the indexes hold another model's vectors than LOCI_EMBEDDER names
        if notice:
            self.stdout.write(self.style.WARNING(notice))
        for upgrade in index_upgrade.notices().values():  # indexed on Milvus Lite or FTS5 before the embedded defaults
            self.stdout.write(self.style.WARNING(upgrade))
        # A backend's own local server (Milvus Lite), before the children, which then find it.
        servers = local_servers()
        for server in servers:
            self.stdout.write(server.start())
        refilled = refill_empty_keyword_index()
        if refilled:  # after an upgrade that changed the keyword analysis: its new index starts empty
            self.stdout.write(f"Keyword index: wrote {refilled} rows (its analysis changed since they were indexed)")
        metrics.clear_files()  # counters start from zero with this run's processes
        start_sweeper()  # stalled documents are queued again even when the workers run elsewhere (--no-worker)
        start_job_sweeper()  # and extraction jobs
        reflection_timer.start()  # the periodic reflection pass, when LOCI_REFLECT_INTERVAL_SECONDS is set
        host, port = opts["host"], opts["port"]
        specs = child_specs(host, port, workers=0 if opts["no_worker"] else opts["concurrency"])
        for spec in specs:
            if spec.worker_hostname:
                worker_liveness.forget(spec.worker_hostname)  # a file left by a killed earlier run is no beat
        supervisor = Supervisor(specs, Path(settings.LOCI_RUN_DIR) / "up.json", is_stuck=_stuck_worker,
                                on_restart=_forget_heartbeat, log=self.stderr.write)
        stopping = False

        def stop(*_):
            nonlocal stopping
            if stopping:  # a second Ctrl-C while the children finish: they are already on their way
                return
            stopping = True
            supervisor.stop_all(STOP_SECONDS)
            for server in servers:  # after the children
                said = server.stop()
                if said:
                    self.stdout.write(said)
            self.stdout.write("Loci stopped.")
            sys.exit(0)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        # From this (the main) thread only, restarts included: a child's parent-death signal fires
        # when the thread that started it ends (loci/die_with_parent.py).
        supervisor.start_all()
        if not _wait_until_listening(host, port, supervisor.children[0].proc):
            self.stderr.write(f"The web server did not start on {host}:{port} (is the port taken? set LOCI_PORT).")
            stop()
        # One write, so that no line of a child's lands between the address and how to sign in there.
        sign_in = sign_in_line(opts["sign_in_as"], os.environ.get("DEMO_PASSWORD", "")) if opts["sign_in_as"] else None
        self.stdout.write(self.style.SUCCESS(f"Loci is up: {_browser_url(host, port)}  (Ctrl-C stops)")
                          + (f"\n{sign_in}" if sign_in else ""))
        # A child that exits or stops making progress is started again with back-off while the others
        # keep serving; only Ctrl-C/SIGTERM (stop) ends them all.
        last_written, proxy_warned = time.monotonic(), False
        while True:
            time.sleep(SUPERVISE_SECONDS)
            if supervisor.check():
                last_written = time.monotonic()
            elif time.monotonic() - last_written > STATE_EVERY_SECONDS:
                supervisor.write_state()  # restart_in_s counts down in /healthz
                last_written = time.monotonic()
                if not proxy_warned:
                    proxy_warned = _warn_of_untrusted_proxy(self)


def llm_line() -> str:
    """Which chat model and endpoint extraction and agentic search use, or why none: a paid model is
    never a surprise, and a key set for another tool is seen to be ignored."""
    if settings.LLM_ENABLED:
        return f"LLM: {settings.LLM_MODEL} at {settings.OPENAI_BASE_URL or OPENAI_DEFAULT_URL} (LOCI_LLM)"
    if settings.OPENAI_API_KEY or settings.OPENAI_BASE_URL:
        return ("LLM: off (OPENAI_API_KEY or OPENAI_BASE_URL is set, but LOCI_LLM is not): "
                "the rules extract and agentic search answers with hybrid")
    return "LLM: off (set LOCI_LLM=1 and OPENAI_BASE_URL or OPENAI_API_KEY to use one)"


def sign_in_line(username: str, password: str) -> str | None:
    """'Sign in as <user> / <password>' when that password signs that user in; else None (never a wrong one)."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None or not password or not user.check_password(password):
        return None
    return f"Sign in as {username} / {password}"


def child_specs(host: str, port: int, *, workers: int) -> list[ChildSpec]:
    """What `up` runs and keeps running: the web server first, then `workers` single-process workers.

    Single-process (`--pool solo`) workers rather than one prefork pool of `workers` processes: a
    prefork child SIGKILLed while idle held the pool's read lock for good, and the worker received
    messages it never handed out (issue 30). A solo worker has no pool to wedge; losing one loses
    one process, which `up` starts again, and its heartbeat says whether it makes progress.
    """
    python = sys.executable
    specs = [ChildSpec("web", [python, "-m", "uvicorn", "loci.asgi:application", "--host", host,
                               "--port", str(port), "--no-access-log"])]
    machine = socket.gethostname()
    for number in range(1, workers + 1):
        name = f"worker{number}"
        specs.append(ChildSpec(name, [python, "-m", "celery", "-A", "loci", "worker", "--pool", "solo",
                                      "--loglevel", "INFO", "--hostname", f"{name}@%h", "--without-gossip",
                                      "--without-mingle"], worker_hostname=f"{name}@{machine}"))
    return specs


def _stuck_worker(child) -> str | None:
    """Why a running worker must be killed: its heartbeat went stale, or it never beat after starting."""
    hostname = child.spec.worker_hostname
    if not hostname:
        return None
    record = worker_liveness.read_record(hostname)
    if record is None or record.get("pid") != child.proc.pid:
        waited = time.monotonic() - child.started_at
        return f"has not started after {waited:.0f}s" if waited > WORKER_START_SECONDS else None
    if worker_liveness.status_of(record) == worker_liveness.STALE:
        if record.get("busy_since"):
            return f"has run one task ({record.get('task')}) past CELERY_TASK_TIME_LIMIT"
        return f"sent no heartbeat for {time.time() - record.get('beat_at', 0):.0f}s"
    return None


def _warn_of_untrusted_proxy(command) -> bool:
    try:
        notice = untrusted_forwarding_notice()
    except Exception:  # the cache unreachable: nothing to say now
        return False
    if notice:
        command.stderr.write(command.style.WARNING(notice))
    return bool(notice)


def _forget_heartbeat(child) -> None:
    if child.spec.worker_hostname:
        worker_liveness.forget(child.spec.worker_hostname)


def _browser_url(host: str, port: int) -> str:
    if host in ALL_INTERFACES:
        return f"http://127.0.0.1:{port}/ (listening on all interfaces)"
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def _wait_until_listening(host: str, port: int, server: subprocess.Popen) -> bool:
    """True once the port accepts a connection; False if the server exits or takes too long."""
    target = "127.0.0.1" if host in ALL_INTERFACES else host
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with socket.create_connection((target, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False
