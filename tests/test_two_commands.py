"""`make run` and `manage.py up` as a user meets them: no reinstall when nothing changed, the real address,
a quiet Ctrl-C, and one var dir for the server and every command beside it (the project's .env)."""

import os
import shutil
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from common.env import load_env_file
from loci.management.commands.up import sign_in_line
from tests.index_fixtures import free_port

ROOT = Path(__file__).resolve().parents[1]


def make_n(cwd: Path, venv: Path, target: str) -> str:
    # As a user's shell runs it: under `make test` (CI) the inherited MAKELEVEL would add
    # "make[1]: Entering/Leaving directory" lines around the recipe.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", "-n", target, f"VENV={venv}", f"PY={venv}/bin/python"], cwd=cwd,
                          capture_output=True, text=True, check=True, env=env).stdout


@pytest.fixture
def project(tmp_path):
    """The Makefile and pyproject.toml in a folder of their own, with a venv whose python exists."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    return tmp_path, venv


@pytest.mark.skipif(not shutil.which("make"), reason="needs make")
def test_make_run_installs_once_then_only_when_pyproject_changes(project):
    cwd, venv = project
    first = make_n(cwd, venv, "run")
    assert "pip install -q -e ." in first and "manage.py up" in first
    stamps = [line.split()[-1] for line in first.splitlines() if line.startswith("touch ")]
    Path(stamps[0]).touch()  # what the install step leaves behind
    second = make_n(cwd, venv, "run")
    assert "pip install" not in second and "manage.py up" in second
    (cwd / "pyproject.toml").write_text((cwd / "pyproject.toml").read_text() + "\n# a new dependency\n")
    assert "pip install -q -e ." in make_n(cwd, venv, "run")


@pytest.mark.skipif(not shutil.which("make"), reason="needs make")
def test_make_test_installs_the_test_extra_once(project):
    cwd, venv = project
    first = make_n(cwd, venv, "test")
    assert 'pip install -q -e ".[test]"' in first
    for line in first.splitlines():
        if line.startswith("touch "):
            for stamp in line.split()[1:]:
                Path(stamp).touch()
    assert "pip install" not in make_n(cwd, venv, "test")
    assert "pip install" not in make_n(cwd, venv, "run")  # the test install includes the package


def test_an_env_file_sets_what_the_environment_does_not(tmp_path, monkeypatch):
    env_file = tmp_path / ".env"
    env_file.write_text("# shared by the server and every command\nLOCI_TEST_A=/data/loci\n"
                        "export LOCI_TEST_B='two words'\nLOCI_TEST_C=from-file\n\n")
    monkeypatch.delenv("LOCI_TEST_A", raising=False)
    monkeypatch.delenv("LOCI_TEST_B", raising=False)
    monkeypatch.setenv("LOCI_TEST_C", "from-environment")
    assert load_env_file(env_file) == ["LOCI_TEST_A", "LOCI_TEST_B"]
    assert os.environ["LOCI_TEST_A"] == "/data/loci" and os.environ["LOCI_TEST_B"] == "two words"
    assert os.environ["LOCI_TEST_C"] == "from-environment"
    monkeypatch.delenv("LOCI_TEST_A")
    monkeypatch.delenv("LOCI_TEST_B")
    assert load_env_file(tmp_path / "missing.env") == []
    env_file.write_text("LOCI_TEST_A /data\n")
    with pytest.raises(ImproperlyConfigured, match="line 1: expected NAME=value"):
        load_env_file(env_file)


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCI_", "MILVUS_", "DJANGO_"))}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def test_a_command_beside_the_server_reads_the_var_dir_from_the_env_file(tmp_path):
    var = tmp_path / "data"
    (tmp_path / "loci.env").write_text(f"LOCI_VAR_DIR={var}\nLOCI_PORT=8123\n")
    code = "from django.conf import settings; print(settings.VAR_DIR, settings.LOCI_PORT)"
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env=_env(tmp_path, LOCI_ENV_FILE=str(tmp_path / "loci.env")), check=True).stdout
    assert out.splitlines()[-1].split() == [str(var), "8123"]  # after the shell's own banner


@pytest.mark.slow
def test_up_says_where_it_serves_and_stops_quietly_on_ctrl_c(tmp_path):
    port = free_port()
    env = _env(tmp_path, LOCI_VAR_DIR=str(tmp_path / "var"), LOCI_PORT=str(port), MILVUS_LITE_PORT=str(free_port()))
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([sys.executable, "manage.py", "bootstrap", "--tenant", "demo", "--kb", "docs", "--user", "admin",
                    "--password", "demo-pw-123"], cwd=ROOT, env=env, check=True, capture_output=True)
    up = subprocess.Popen([sys.executable, "manage.py", "up", "--concurrency", "1", "--sign-in-as", "admin"], cwd=ROOT,
                          env={**env, "DEMO_PASSWORD": "demo-pw-123"}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    # A deadline for the whole test: reading up's output blocks, and a line that never comes must fail
    # the test, not hang the suite.
    watchdog = threading.Timer(240, lambda: up.poll() is None and os.killpg(up.pid, signal.SIGKILL))
    watchdog.start()
    try:
        for line in up.stdout:
            lines.append(line)
            if "Loci is up" in line:
                break
        else:
            raise AssertionError(f"up exited {up.wait()} before it was up:\n{''.join(lines)}")
        assert f"Loci is up: http://127.0.0.1:{port}/" in lines[-1]
        lines.append(up.stdout.readline())  # written with the address, so no child's line comes between
        assert lines[-1].strip() == "Sign in as admin / demo-pw-123"
        try:  # it says so once it answers, not before
            status = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30).status
        except urllib.error.HTTPError as exc:  # 503 while an engine warms up is still this server answering
            status = exc.code
        assert status in (200, 503)
        # Until the worker is ready, so that Ctrl-C meets its pool processes (it may have said so
        # before the web server answered).
        for line in ([] if any("ready." in seen for seen in lines) else up.stdout):
            lines.append(line)
            if "ready." in line:
                break
        os.killpg(up.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
        rest = up.communicate(timeout=60)[0]
        assert up.returncode == 0
    finally:
        watchdog.cancel()
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
    output = "".join(lines) + rest
    assert "Loci stopped." in rest
    assert "ERROR" not in output and "Traceback" not in output, output[-3000:]


def test_make_run_has_up_print_the_sign_in_line_with_the_address(project):
    cwd, venv = project
    recipe = make_n(cwd, venv, "run").splitlines()
    up = [line for line in recipe if "manage.py up" in line]
    assert up and "--sign-in-as admin" in up[-1] and "DEMO_PASSWORD=" in up[-1]
    assert "manage.py up" in recipe[-1]  # up is the last thing run, so its lines are the last ones printed


def test_the_sign_in_line_names_a_password_only_when_it_works(world):
    assert sign_in_line("alice", "alice-pw-123") == "Sign in as alice / alice-pw-123"
    assert sign_in_line("alice", "wrong") is None
    assert sign_in_line("nobody", "alice-pw-123") is None
    assert sign_in_line("alice", "") is None
