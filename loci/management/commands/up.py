import os
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from ingest.sweeper import start_sweeper
from loci import metrics
from loci.backends import DEFAULT_ALIAS, vector_indexes
from retrieval.backends.milvus import MilvusVectorIndex
from retrieval import vector_upgrade
from retrieval.embeddings import identity
from retrieval.milvus_lite import ensure_server, release
from retrieval.projection import refill_empty_keyword_index

ALL_INTERFACES = ("0.0.0.0", "::", "")
STARTUP_SECONDS = 120  # the web server imports Django and the apps before it listens
STOP_SECONDS = 20


class Command(BaseCommand):
    help = ("Start the web server and a Celery worker together (and a Milvus Lite server when selected); "
            "Ctrl-C or SIGTERM stops all of them.")

    def add_arguments(self, parser):
        parser.add_argument("--host", default=settings.LOCI_HOST, help="default: LOCI_HOST")
        parser.add_argument("--port", type=int, default=settings.LOCI_PORT, help="default: LOCI_PORT")
        parser.add_argument("--concurrency", type=int, default=settings.LOCI_WORKER_CONCURRENCY)
        parser.add_argument("--no-worker", action="store_true")

    def handle(self, *args, **opts):
        self.stdout.write(f"Data: {settings.VAR_DIR} (LOCI_VAR_DIR)")
        notice = identity.notice()  # the indexes hold another model's vectors than LOCI_EMBEDDER names
        if notice:
            self.stdout.write(self.style.WARNING(notice))
        upgrade = vector_upgrade.notice()  # indexed on Milvus Lite before the embedded default
        if upgrade:
            self.stdout.write(self.style.WARNING(upgrade))
        lite_path = None
        # The default alias as the backend handler reads it (a settings module may name aliases);
        # every build of it shares its Milvus Lite file, so one server serves them all.
        options = vector_indexes.options(DEFAULT_ALIAS)
        if not options.get("uri") and options.get("lite_path") and _is_milvus(vector_indexes.backend(DEFAULT_ALIAS)):
            # Before the children, which then find it (and register as its users) instead of racing to start it.
            lite_path = options["lite_path"]
            uri = ensure_server(lite_path, options["lite_port"] or None)
            self.stdout.write(f"Milvus Lite: {uri} ({lite_path})")
        refilled = refill_empty_keyword_index()
        if refilled:  # after an upgrade that changed the keyword analysis: its new index starts empty
            self.stdout.write(f"Keyword index: wrote {refilled} rows (its analysis changed since they were indexed)")
        metrics.clear_files()  # counters start from zero with this run's processes
        start_sweeper()  # stalled documents are queued again even when the workers run elsewhere (--no-worker)
        host, port = opts["host"], opts["port"]
        python = sys.executable
        commands = [
            [python, "-m", "uvicorn", "loci.asgi:application", "--host", host, "--port", str(port), "--no-access-log"],
        ]
        if not opts["no_worker"]:
            commands.append([python, "-m", "celery", "-A", "loci", "worker", "--loglevel", "INFO",
                             "--concurrency", str(opts["concurrency"]), "--without-gossip", "--without-mingle"])
        # Each in a session of its own: Ctrl-C reaches only this process, which stops them in order.
        children = [subprocess.Popen(cmd, start_new_session=True) for cmd in commands]
        stopping = False

        def stop(*_):
            nonlocal stopping
            if stopping:  # a second Ctrl-C while the children finish: they are already on their way
                return
            stopping = True
            # To each child's main process only: celery's warm shutdown ends its pool processes itself
            # (signalling the whole group killed them under it, which it reports as ERROR lines).
            for child in children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_SECONDS
            for child in children:
                try:
                    child.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
            if lite_path:
                # After the children: it stops now unless another process (a `manage.py ingest` run
                # beside up) still uses it, and then stops when that one exits.
                if not release(lite_path):
                    self.stdout.write("Milvus Lite: stops when the last process still using it exits")
            self.stdout.write("Loci stopped.")
            sys.exit(0)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        if not _wait_until_listening(host, port, children[0]):
            self.stderr.write(f"The web server did not start on {host}:{port} (is the port taken? set LOCI_PORT).")
            stop()
        self.stdout.write(self.style.SUCCESS(f"Loci is up: {_browser_url(host, port)}  (Ctrl-C stops)"))
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        self.stderr.write("A process exited; stopping the others.")
        stop()


def _is_milvus(backend) -> bool:
    return isinstance(backend, type) and issubclass(backend, MilvusVectorIndex)


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
