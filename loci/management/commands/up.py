import os
import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand

from ingest.sweeper import start_sweeper
from loci.backends import DEFAULT_ALIAS, vector_indexes
from retrieval.backends.milvus import MilvusVectorIndex
from retrieval.milvus_lite import ensure_server, release
from retrieval.projection import refill_empty_keyword_index


class Command(BaseCommand):
    help = ("Start the web server and a Celery worker together (and the embedded Milvus Lite server); "
            "Ctrl-C or SIGTERM stops all of them.")

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("LOCI_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("LOCI_PORT", "8000")))
        parser.add_argument("--concurrency", type=int, default=int(os.environ.get("LOCI_WORKER_CONCURRENCY", "2")))
        parser.add_argument("--no-worker", action="store_true")

    def handle(self, *args, **opts):
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
        start_sweeper()  # stalled documents are queued again even when the workers run elsewhere (--no-worker)
        python = sys.executable
        commands = [
            [python, "-m", "uvicorn", "loci.asgi:application", "--host", opts["host"], "--port", str(opts["port"]),
             "--no-access-log"],
        ]
        if not opts["no_worker"]:
            commands.append([python, "-m", "celery", "-A", "loci", "worker", "--loglevel", "INFO",
                             "--concurrency", str(opts["concurrency"]), "--without-gossip", "--without-mingle"])
        children = [subprocess.Popen(cmd, start_new_session=True) for cmd in commands]
        self.stdout.write(self.style.SUCCESS(f"Loci is up: http://{opts['host']}:{opts['port']}/  (Ctrl-C stops)"))

        def stop(*_):
            for child in children:
                if child.poll() is None:
                    os.killpg(child.pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            for child in children:
                try:
                    child.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)
            if lite_path:
                # After the children: it stops now unless another process (a `manage.py ingest` run
                # beside up) still uses it, and then stops when that one exits.
                if not release(lite_path):
                    self.stdout.write("Milvus Lite: stops when the last process still using it exits")
            sys.exit(0)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        self.stderr.write("A process exited; stopping the others.")
        stop()


def _is_milvus(backend) -> bool:
    return isinstance(backend, type) and issubclass(backend, MilvusVectorIndex)
