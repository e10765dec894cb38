"""One console installation for the whole session, shared by every browser test.

The installation is what `manage.py up` runs, as subprocesses over one throwaway var dir: a uvicorn
web server and a `celery worker` (SQLite file, filesystem broker, keyword index, Milvus Lite);
nothing is eager. Building it (migrate, collectstatic, the worker's start, Chromium's) takes tens of
seconds, so it is built once, at the first test that asks, and stopped when the session ends.

Tests share the installation, never each other's data: each signs in as the owner of a tenant of
its own (`console.tenant()`), so what one test uploads no other test sees or counts on.

Chromium is started once per module (`browser`). The fixtures are registered in tests/conftest.py. The instances live in the session's stash, so
a module that imports these fixtures by name still gets the same installation, not a second one.
"""

import os
import secrets
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.worker_process import PYTHON, REPO, Worker, app_env, free_port, stop_milvus_lite, with_parent

CHROMIUM = os.environ.get("LOCI_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = (REPO / "docs" / "screenshots" if os.environ.get("LOCI_SCREENSHOTS") == "docs"
               else Path(tempfile.gettempdir()) / "loci-screenshots")
PROCESSING_TIMEOUT_MS = 150_000
# How often the installation's worker looks for a message: kombu's default (1 s), not the 0.1 s every
# other test process uses (tests/worker_process.py: app_env). At 0.1 s the upload page lost track of
# documents: test_console_viewers' four files were all ready in the database within 18 s, their rows
# not within 150 s (2026-12-01, again after the broker's lost messages were fixed: not the broker).
BROKER_POLL_SECONDS = "1.0"

SETUP = """
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("collectstatic", interactive=False, verbosity=0)
"""

TENANTS = """
from django.contrib.auth import get_user_model
from django.core.management import call_command
from tenants.models import Membership, Role, Tenant
for slug, user, password, viewers in {tenants!r}:
    call_command("bootstrap", tenant=slug, kb="docs", user=user, password=password)
    for viewer, viewer_password in viewers:
        member = get_user_model().objects.create_user(viewer, password=viewer_password)
        Membership.objects.create(user=member, tenant=Tenant.objects.get(slug=slug), role=Role.VIEWER)
"""

_CONSOLE = pytest.StashKey["ConsoleServer"]()


@dataclass(frozen=True)
class ConsoleTenant:
    """A tenant with one knowledge base, `docs`, and its owner; `viewers` are read-only members."""

    slug: str
    user: str
    password: str
    viewers: tuple[tuple[str, str], ...] = ()


class ConsoleServer:
    def __init__(self, base: str, env: dict):
        self.base, self.env = base, env
        self.passwords: dict[str, str] = {}

    def shell(self, code: str) -> str:
        """Run Django code in the server's database (a `manage.py shell -c`); what it printed."""
        done = subprocess.run([PYTHON, "manage.py", "shell", "-c", code], cwd=REPO, env=self.env,
                              capture_output=True, text=True, timeout=180)
        if done.returncode:
            raise AssertionError(f"manage.py shell exited {done.returncode}:\n{done.stderr[-3000:]}")
        return done.stdout

    def tenants(self, count: int = 1, *, viewers: int = 0) -> list[ConsoleTenant]:
        """`count` new tenants of this installation (one shell for all), each with its owner and `viewers`."""
        made = []
        for _ in range(count):
            tag = secrets.token_hex(4)
            made.append(ConsoleTenant(f"t-{tag}", f"owner-{tag}", f"pw-{secrets.token_hex(8)}",
                                      tuple((f"viewer{i}-{tag}", f"pw-{secrets.token_hex(8)}") for i in range(viewers))))
        self.shell(TENANTS.format(tenants=[(t.slug, t.user, t.password, list(t.viewers)) for t in made]))
        for t in made:
            self.passwords[t.user] = t.password
            self.passwords.update(t.viewers)
        return made

    def tenant(self, *, viewers: int = 0) -> ConsoleTenant:
        return self.tenants(1, viewers=viewers)[0]

    def ingest(self, tenant: ConsoleTenant, *paths: Path, timeout: float = 300) -> None:
        """Upload files to the tenant's `docs` through `manage.py ingest --wait`: the worker processes them."""
        done = subprocess.run([PYTHON, "manage.py", "ingest", *map(str, paths), "--tenant", tenant.slug, "--kb", "docs",
                               "--wait", "--timeout", str(timeout)], cwd=REPO, env=self.env, capture_output=True,
                              text=True, timeout=timeout + 60)
        if done.returncode:
            raise AssertionError(f"manage.py ingest exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}")


def _wait_for_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"web server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"web server did not answer {url} within {timeout}s:\n{log.read_text()[-3000:]}")


def _start_console(request, tmp_path_factory) -> ConsoleServer:
    var = tmp_path_factory.mktemp("console")
    env = app_env(var, DEBUG="0", LOCI_BROKER_POLL_SECONDS=BROKER_POLL_SECONDS)
    subprocess.run([PYTHON, "manage.py", "shell", "-c", SETUP], cwd=REPO, env=env, check=True,
                   capture_output=True, timeout=180)
    port = free_port()
    web_log = var / "web.log"
    with open(web_log, "ab") as log:
        web = subprocess.Popen(with_parent([PYTHON, "-m", "uvicorn", "loci.asgi:application", "--host", "127.0.0.1",
                                            "--port", str(port), "--no-access-log"]), cwd=REPO, env=env,
                               stdin=subprocess.DEVNULL,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    worker = Worker(env, var / "worker.log", name="console")

    def stop():  # at the end of the session, also when the start fails half-way
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGTERM)
            try:
                web.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(web.pid, signal.SIGKILL)
                web.wait(timeout=15)
        worker.stop(timeout=15)
        stop_milvus_lite(var)

    request.config.add_cleanup(stop)
    worker.start()
    base = f"http://127.0.0.1:{port}"
    _wait_for_http(base + "/login/", web, web_log)
    worker.wait_ready()
    return ConsoleServer(base, env)


@pytest.fixture(scope="session")
def console(request, tmp_path_factory) -> ConsoleServer:
    """The session's console installation (`.base`, `.tenant()`, `.shell(code)`, `.ingest(...)`)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    stash = request.config.stash
    if _CONSOLE not in stash:
        stash[_CONSOLE] = _start_console(request, tmp_path_factory)
    return stash[_CONSOLE]


@pytest.fixture(scope="session")
def server(console) -> str:
    """Base URL of the console's web server."""
    return console.base


@pytest.fixture(scope="module")
def browser():
    """A Chromium (Playwright) for each module's browser tests; their contexts (`sign_in`) hold their
    pages and cookies. Per module, not per session: Playwright's sync API keeps an event loop running
    in this thread while it is started, and later tests' `asyncio.run` (the MCP client) refuse to run
    beside it. A launch takes a second or two; the installation (`console`) is what is shared."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def sign_in(browser, base: str, username: str, password: str):
    context = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=base)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto("/")  # anonymous: sent to the sign-in page first
    assert "/login/" in page.url
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/")
    page.js_errors = errors
    return page


def shot(page, name: str, *, full_page: bool = False) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    if full_page:
        page.evaluate("window.scrollTo(0, 0)")  # the sticky header is drawn where the page is scrolled to
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)
