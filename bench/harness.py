"""A throwaway embedded Loci for benchmarks: temp var dir, migrated SQLite, one tenant and KB."""

import atexit
import os
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

SHARED_DATA = Path(os.environ.get("LOCI_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_django(var_dir: str | None = None, *, eager: bool = True) -> Path:
    """Point settings at a fresh var dir (its own Milvus Lite port), set up Django and migrate."""
    var = Path(var_dir or tempfile.mkdtemp(prefix="loci-bench-"))
    os.environ["LOCI_VAR_DIR"] = str(var)
    os.environ.setdefault("MILVUS_LITE_PORT", str(_free_port()))
    os.environ["DJANGO_SETTINGS_MODULE"] = "loci.settings"
    # A benchmark is one caller asking as fast as it can: the per-key request rates would measure themselves.
    os.environ.setdefault("LOCI_RATE_LIMIT_USER", "off")
    os.environ.setdefault("LOCI_RATE_LIMIT_SEARCH", "off")
    if eager:
        os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    atexit.register(_stop_milvus_lite, var / "milvus.db")
    return var


def _stop_milvus_lite(path: Path) -> None:
    """The embedded Milvus Lite server a benchmark started lives on after it; stop it at exit."""
    from retrieval.milvus_lite import stop_server

    stop_server(path)


def make_scope(tenant_slug: str = "bench", kb_slug: str = "bench"):
    from tenants.access import Scope
    from tenants.models import KnowledgeBase, Tenant

    tenant, _ = Tenant.objects.get_or_create(slug=tenant_slug, defaults={"name": tenant_slug})
    kb, _ = KnowledgeBase.objects.get_or_create(tenant=tenant, slug=kb_slug, defaults={"name": kb_slug})
    return Scope(tenant, frozenset([kb.pk]), True, True, "bench"), kb


@contextmanager
def timed(label: str, into: dict):
    start = time.perf_counter()
    yield
    into[label] = into.get(label, 0.0) + time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]
