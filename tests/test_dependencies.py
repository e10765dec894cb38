"""Every third-party module the code imports comes from a package pyproject.toml declares.

The development venv holds more than the project declares (packages left from earlier installs, another
package's dependencies), so an undeclared import would pass every other test here and then fail on a
fresh install. This walks the imports and the declared dependency closure instead.
"""

import ast
import importlib.metadata as metadata
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# The project's own packages, as the install finds them (so a new app cannot be forgotten here).
INSTALLED = tuple(p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"])
LOCAL = {*INSTALLED, "tests", "bench", "manage"}  # bench/ runs from a checkout; it is not installed
APP_PACKAGES = INSTALLED


def _imports(folders) -> dict[str, str]:
    """{top-level module: a file importing it} for every absolute import under the folders."""
    found = {}
    for folder in folders:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(REPO)))
    return {m: f for m, f in found.items() if m not in LOCAL and m not in sys.stdlib_module_names}


def _closure(requirements: list[str]) -> set[str]:
    """Names of the installed distributions that the requirements pull in, extras followed."""
    seen, stack = set(), [Requirement(r) for r in requirements]
    while stack:
        req = stack.pop()
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        key = _canonical(req.name) + "[" + ",".join(sorted(req.extras)) + "]"
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.distribution(req.name).requires or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            dep = Requirement(line)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in req.extras or {""}):
                stack.append(Requirement(str(dep).split(";")[0]))
    return {k.split("[")[0] for k in seen}


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _undeclared(imports: dict[str, str], declared: set[str]) -> dict[str, str]:
    providers = metadata.packages_distributions()
    return {module: where for module, where in imports.items()
            if not {_canonical(d) for d in providers.get(module, [])} & declared}


PROJECT = PYPROJECT["project"]


def test_the_app_imports_only_what_the_default_install_brings():
    assert _undeclared(_imports(APP_PACKAGES), _closure(PROJECT["dependencies"])) == {}


# The Python client is a distribution of its own in this repository (clients/python), which
# `make install-test` installs beside the server for the tests that drive it.
CLIENT = tomllib.loads((REPO / "clients" / "python" / "pyproject.toml").read_text())["project"]


def test_the_client_imports_only_what_its_own_distribution_declares():
    declared = _closure(CLIENT["dependencies"]) | {_canonical(CLIENT["name"])}
    assert _undeclared(_imports(("clients/python/loci_client",)), declared) == {}


def test_tests_and_benchmarks_import_only_what_the_test_extra_adds():
    declared = _closure(PROJECT["dependencies"] + PROJECT["optional-dependencies"]["test"]) | {_canonical(CLIENT["name"])}
    assert _undeclared(_imports(("tests",)), declared) == {}
    # The reranker's trainer and its side measurements may also use the `train` extra (torch is
    # never a test dependency: CI does not install it).
    # CI has not installed it, so its modules are matched by name (each is named as its package).
    extras = PROJECT["optional-dependencies"]
    train = {_canonical(Requirement(r).name) for r in extras["train"]}
    undeclared = _undeclared(_imports(("bench",)), _closure(PROJECT["dependencies"] + extras["test"] + extras["train"]))
    assert {m: f for m, f in undeclared.items() if _canonical(m) not in train} == {}


def test_unstructured_is_not_installed_by_default():
    # No code path imports it (≈ 46 packages, 475 MB); the long-tail parsers read those formats themselves.
    assert "unstructured" not in _closure(PROJECT["dependencies"])
    assert "unstructured" not in _imports(APP_PACKAGES + ("tests", "bench"))


def test_benchmarks_and_tests_are_not_installed_with_the_package():
    """bench/ and tests/ run from a checkout: an install of the package brings the apps only."""
    assert not {"bench", "tests"} & set(INSTALLED)
