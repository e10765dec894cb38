"""Shared fixtures: alice owns tenant acme, bob is a viewer there, charlie owns tenant globex."""

import os
import re
import shutil
from pathlib import Path

import pytest

# The processes and in-process imports of the suite load their models when first used, as before
# retrieval/warmup.py (tests/test_warmup.py turns it on where it is what is tested).
os.environ.setdefault("LOCI_WARM_START", "0")

from tests.browser_fixtures import browser, console, server  # noqa: F401  (fixtures: one installation per session)
from tests.index_fixtures import lite_vector_settings, memory_backed_dir, milvus_lite_uri  # noqa: F401  (fixtures)
from tests.schema_check import api_schema_check  # noqa: F401  (fixture: responses checked against the schema)

# The index contract is a module shared by the backends' test classes (tests/test_index_contract.py):
# its asserts explain a failure as a test module's do.
pytest.register_assert_rewrite("tests.index_contract")

SHARED_DATA = Path(os.environ.get("LOCI_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
DOCS = SHARED_DATA / "docs" / "unstructured"


@pytest.fixture(scope="session", autouse=True)
def embedding_cache_of_this_run(tmp_path_factory):
    """The embedding cache every test of this run uses, and every process a test starts (`app_env`).

    A cache left by an earlier run, perhaps of another embedder version, would serve vectors the
    code under test never computed and hide a regression; so each run starts empty, and only a test
    that asks for `warm_embedding_cache` reads vectors of earlier runs. Set at session scope, before
    any module fixture starts a process, and restored afterwards.
    """
    from django.conf import settings

    previous = settings.EMBEDDING_CACHE_PATH
    settings.EMBEDDING_CACHE_PATH = tmp_path_factory.mktemp("embedding-cache") / "embedding-cache.sqlite3"
    yield settings.EMBEDDING_CACHE_PATH
    settings.EMBEDDING_CACHE_PATH = previous


@pytest.fixture
def warm_embedding_cache(settings, embedding_cache_of_this_run):
    """A cache kept between runs, for a slow test whose time goes into embedding the same texts again.

    One file per embedder name, which carries the model's package version, under the var dir (never
    committed): vectors of another model or version are never served. The processes the test starts
    get the same file through `app_env`.
    """
    from retrieval.embeddings import build_provider

    name = re.sub(r"[^\w.@+-]+", "_", build_provider(settings.LOCI_EMBEDDER).name)
    settings.EMBEDDING_CACHE_PATH = settings.VAR_DIR / "test-embedding-cache" / f"{name}.sqlite3"
    return settings.EMBEDDING_CACHE_PATH


@pytest.fixture(autouse=True)
def _isolated_var(settings, tmp_path):
    """Each test gets its own media and index directories under tmp_path (the keyword index's in memory)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast fixtures
    # A cache of the test's own: failed-credential counters must not carry over between tests.
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                                   "LOCATION": str(tmp_path)}}
    keyword_dir = memory_backed_dir(tmp_path)
    settings.LOCI_KEYWORD_INDEX = {
        **settings.LOCI_KEYWORD_INDEX,
        "OPTIONS": {**settings.LOCI_KEYWORD_INDEX["OPTIONS"], "path": str(tmp_path / "keyword.sqlite3"),
                    "directory": str(keyword_dir / "keyword-index")},
    }
    settings.LOCI_VECTOR_INDEX = {
        **settings.LOCI_VECTOR_INDEX,
        "OPTIONS": {**settings.LOCI_VECTOR_INDEX["OPTIONS"], "path": str(tmp_path / "vectors.sqlite3"),
                    "lite_path": str(tmp_path / "milvus.db")},
    }
    settings.MILVUS_LITE_PATH = tmp_path / "milvus.db"
    # Each test's builds and their recorded embedder identity are its own (never the checkout's var).
    settings.LOCI_INDEX_STATE = tmp_path / "index-builds.json"
    yield
    if keyword_dir != tmp_path:
        shutil.rmtree(keyword_dir, ignore_errors=True)


class FakeClock:
    """Wall-clock seconds that move only when a test says so (`advance`)."""

    def __init__(self, start: float):
        self.time = start

    def __call__(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds


@pytest.fixture
def clock(monkeypatch):
    """The throttles' clock (tenants/clock.py), stopped: a test moves it past a window instead of sleeping."""
    import time

    from tenants import clock as throttle_clock

    fake = FakeClock(time.time())
    monkeypatch.setattr(throttle_clock, "now", fake)
    return fake


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Run what a call queues on commit (index writes and removals), as a real request's commit would:
    the test transaction never commits."""
    def run(call, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return call(*args, **kwargs)
    return run


@pytest.fixture
def world(db):
    from django.contrib.auth import get_user_model

    from tenants.models import ApiKey, KnowledgeBase, Membership, Role, Tenant

    User = get_user_model()
    acme = Tenant.objects.create(slug="acme", name="Acme")
    globex = Tenant.objects.create(slug="globex", name="Globex")
    docs = KnowledgeBase.objects.create(tenant=acme, slug="docs", name="Docs")
    notes = KnowledgeBase.objects.create(tenant=acme, slug="notes", name="Notes")
    secret = KnowledgeBase.objects.create(tenant=globex, slug="secret", name="Secret")
    alice = User.objects.create_user("alice", password="alice-pw-123")
    bob = User.objects.create_user("bob", password="bob-pw-123")
    charlie = User.objects.create_user("charlie", password="charlie-pw-123")
    Membership.objects.create(user=alice, tenant=acme, role=Role.OWNER)
    Membership.objects.create(user=bob, tenant=acme, role=Role.VIEWER)
    Membership.objects.create(user=charlie, tenant=globex, role=Role.OWNER)
    _, alice_key = ApiKey.issue(acme, "alice-rw", can_write=True)
    _, acme_ro_key = ApiKey.issue(acme, "acme-ro")
    _, charlie_key = ApiKey.issue(globex, "charlie-rw", can_write=True)

    class World:
        pass

    w = World()
    w.__dict__.update(locals())
    return w


def api_client(key: str | None = None, user=None):
    from rest_framework.test import APIClient

    client = APIClient()
    if key:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    if user is not None:
        client.force_login(user)
    return client


# `make test` runs the suite in three processes (pytest-xdist: -n 3 --dist loadgroup). A session-scoped
# resource exists once per process, so the tests sharing one that is costly to start run in one
# process: the console installation with its web server, worker and Chromium (tests/browser_fixtures.py),
# and the Milvus 2.3 server (tests/index_fixtures.py). Everything else a test starts (ports, var dirs,
# PostgreSQL databases, Redis databases, RabbitMQ vhosts) is its own, so any two tests may run at once.
XDIST_GROUPS = {"console": "console-installation", "milvus_server": "milvus-server", "real_llm_server": "real-llm"}
# Modules whose module-scoped fixture is costly (a server with its worker, a model built or loaded, texts
# encoded): spread over three processes, each process started its own (the client library's server three
# times, 13-19 s each); kept in one process, it is made once.
MODULE_GROUPS = {"test_client_library", "test_mcp_server", "test_colbert_channel", "test_e5_onnx", "test_e5_rerank",
                 "test_milvus_lite_server"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = next((g for fixture, g in XDIST_GROUPS.items() if fixture in item.fixturenames), None)
        module = item.module.__name__.rpartition(".")[2] if item.module else ""
        group = group or (module.removeprefix("test_").replace("_", "-") if module in MODULE_GROUPS else None)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
            if hasattr(config, "workerinput") and config.getvalue("loadgroup"):
                _name_group_in_node_id(item, group)
    if hasattr(config, "workerinput"):
        # Under xdist the tests marked slow (minutes of real processes) are handed out first, so that
        # none of them starts last while the other workers have run out of tests. (Not when run in
        # one process: a module's tests then stay together, with its module-scoped fixtures.)
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _name_group_in_node_id(item, group: str) -> None:
    """What xdist's loadgroup does to a grouped test: its node id ends with `@group`, the only thing
    the scheduler (in the controller, which sees ids only) groups by. xdist 3.8 writes that id into
    `item._nodeid`, which pytest 9.2 no longer reads (a node's id is `item._id`, a NodeId): every
    group was silently spread over the workers, each starting its own console installation, Milvus
    server and llama.cpp server (seen in the 876 s run of 2026-12-05: three of each). Set here, and
    checked, so that a later pytest or xdist that changes this again fails the run instead."""
    from _pytest.nodeid import NodeId

    if not item.nodeid.endswith(f"@{group}"):
        item._id = NodeId.parse(f"{item.nodeid}@{group}")
    if not item.nodeid.endswith(f"@{group}"):
        raise pytest.UsageError(f"cannot put {item.nodeid} in xdist group {group!r}: tests/conftest.py "
                                "_name_group_in_node_id no longer matches this pytest's node ids")


@pytest.hookimpl(trylast=True)  # after the test's own fixtures, which may still use the server
def pytest_runtest_teardown(item, nextitem):
    """The session's embedded Milvus 2.3 server stops once the tests that use it are done, not at the
    end of the session: under xdist's loadgroup they come to one worker as one run of tests; alone,
    the server stops after the last of them."""
    from tests.index_fixtures import release_embedded_milvus

    if "milvus_server" not in item.fixturenames or (nextitem and "milvus_server" in nextitem.fixturenames):
        return
    if hasattr(item.config, "workerinput") and item.config.getvalue("loadgroup"):
        release_embedded_milvus(item.config)
    elif not any("milvus_server" in later.fixturenames
                 for later in item.session.items[item.session.items.index(item) + 1:]):
        release_embedded_milvus(item.config)


def pytest_terminal_summary(terminalreporter):
    """How many tests skipped, and why, grouped by reason: a skip must be seen, not just counted."""
    from collections import Counter

    from tests.worker_process import REQUIRE_SERVICES

    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons = Counter()
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    terminalreporter.section(f"{len(skipped)} skipped", sep="-", bold=True)
    for reason, count in reasons.most_common():
        terminalreporter.line(f"{count:5d}  {reason}")
    if not REQUIRE_SERVICES:
        terminalreporter.line("(LOCI_REQUIRE_SERVICES=1, which .ci/run sets, fails the tests that need PostgreSQL, "
                              "Redis or RabbitMQ when one is missing, instead of skipping them)")
