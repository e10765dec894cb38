"""Move retrieval/ into its concerns and rewrite every import and path that names the old places (issue 38).

    python scripts/relayout_retrieval.py          # from the repository root; git mv + rewrite, idempotent

Run it again on a branch that still uses the old paths (before or after merging the move): files
still at an old place are moved with `git mv`, and every tracked text file's dotted names
(`retrieval.rerankers`, in imports, mock targets and settings strings), `from retrieval import x`
lines and slash paths (`retrieval/colbert.py`, `retrieval/models/`) are rewritten. What it leaves:
the migrations (historical by design) and bench/RESULTS.md (a dated record of what ran then).
After it: `ruff check .` and `python tests/test_architecture.py`, then fix by hand what remains.
"""

import re
import subprocess
import sys
from pathlib import Path

# old module -> new module. Model runtimes into retrieval/runtimes/, the rerank stage into the search
# package beside the other stages, the index-side modules beside the index backends. retrieval/builds.py
# stays: a leaf (which build is live) that the embedders read too, and runtimes import no index.
MOVES = {
    "retrieval.onnx_models": "retrieval.runtimes.onnx_graph",
    "retrieval.wordpiece": "retrieval.runtimes.wordpiece",
    "retrieval.colbert": "retrieval.runtimes.colbert",
    "retrieval.cross_encoder": "retrieval.runtimes.cross_encoder",
    "retrieval.bundled_models": "retrieval.runtimes.bundled_models",
    "retrieval.e5_rerank": "retrieval.runtimes.e5_rerank",
    "retrieval.e5_rerank_format": "retrieval.runtimes.e5_rerank_format",
    "retrieval.rerankers": "retrieval.runtimes.rerankers",
    "retrieval.reranking": "retrieval.search.rerank",
    "retrieval.token_vectors": "retrieval.backends.token_vectors",
    "retrieval.index_upgrade": "retrieval.backends.index_upgrade",
}
# Folders (slash paths): the trained weights, beside the ORM's models.py, get a name of their own.
FOLDERS = {"retrieval/models/": "retrieval/weights/"}
NEW_PACKAGES = {"retrieval/runtimes/__init__.py": '"""The model runtimes of retrieval: ONNX graphs, tokenizers, '
                "ColBERT, the cross-encoders and the reranker slot.\n\nEmbedders live in retrieval/embeddings/; "
                'the search stages that call these in retrieval/search/."""\n'}
SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".html", ".sh"}
NAMES = {"Makefile", "Dockerfile", "run"}
SKIP = re.compile(r"(^|/)migrations/|^bench/RESULTS\.md$|^scripts/relayout_retrieval\.py$")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def move_files() -> None:
    for path, text in NEW_PACKAGES.items():
        if not Path(path).exists():
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text)
            git("add", path)
    for old, new in MOVES.items():
        src, dst = Path(old.replace(".", "/") + ".py"), Path(new.replace(".", "/") + ".py")
        if src.exists() and not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            git("mv", str(src), str(dst))
    for old, new in FOLDERS.items():
        for src in sorted(Path(old).glob("*")) if Path(old).is_dir() else []:
            if git("ls-files", str(src)).strip():
                Path(new).mkdir(parents=True, exist_ok=True)
                git("mv", str(src), str(Path(new) / src.name))
        if Path(old).is_dir() and not any(Path(old).iterdir()):
            Path(old).rmdir()  # git tracks no folders: an empty one left behind would still read as a package


def split_from_retrieval(match: re.Match) -> str:
    """`from retrieval import fitted, colbert` -> one line per package the names now live in."""
    indent, body = match.group(1), match.group(2)
    body, hash_, comment = body.partition("#")  # a trailing comment stays on the first line
    body = body.strip()
    if not any(MOVES.get(f"retrieval.{n.strip().partition(' as ')[0]}") for n in body.strip("()").split(",")):
        return match.group(0)  # nothing of it moved: left as written
    names = [n.strip() for n in body.strip("()").replace("\n", " ").split(",") if n.strip()]
    groups: dict[str, list[str]] = {}
    for name in names:
        module, _, alias = name.partition(" as ")
        new = MOVES.get(f"retrieval.{module.strip()}")
        package, _, leaf = new.rpartition(".") if new else ("retrieval", "", module.strip())
        groups.setdefault(package, []).append(f"{leaf} as {alias.strip()}" if alias else leaf)
    lines = [f"{indent}from {package} import {', '.join(sorted(leaves))}" for package, leaves in sorted(groups.items())]
    lines[0] += f"  #{comment.rstrip()}" if hash_ else ""
    return "\n".join(lines)


FROM_RETRIEVAL = re.compile(r"^([ \t]*)from retrieval import (\([^)]*\)|[^\n]+)$", re.M)
DOTTED = re.compile(r"\bretrieval\.(" + "|".join(sorted((m.split(".", 1)[1] for m in MOVES), key=len, reverse=True))
                    + r")(?![\w])")
SLASHED = re.compile(r"\bretrieval/(" + "|".join(sorted((m.split(".", 1)[1] for m in MOVES), key=len, reverse=True))
                     + r")(?![\w])")


def rewrite(text: str, path: str) -> str:
    renamed = []  # modules imported by their leaf whose leaf changed: `onnx_models.X` -> `onnx_graph.X`
    for match in FROM_RETRIEVAL.finditer(text):
        for name in match.group(2).partition("#")[0].strip().strip("()").replace("\n", " ").split(","):
            module, _, alias = name.strip().partition(" as ")
            new = MOVES.get(f"retrieval.{module.strip()}")
            if new and not alias and new.rpartition(".")[2] != module.strip():
                renamed.append((module.strip(), new.rpartition(".")[2]))
    text = FROM_RETRIEVAL.sub(split_from_retrieval, text)
    for old, new in renamed:
        text = re.sub(rf"(?<![\w./]){old}\.", f"{new}.", text)
    text = DOTTED.sub(lambda m: MOVES[f"retrieval.{m.group(1)}"], text)
    text = SLASHED.sub(lambda m: MOVES[f"retrieval.{m.group(1)}"].replace(".", "/"), text)
    for old, new in FOLDERS.items():
        text = text.replace(old, new)
    if path == "pyproject.toml":  # package data is relative to the package: retrieval = ["models/*.npz", ...]
        text = re.sub(r'^(retrieval = \[.*)$', lambda m: m.group(1).replace('"models/', '"weights/'), text, flags=re.M)
    return text


def main() -> int:
    move_files()
    changed = 0
    for path in git("ls-files").splitlines():
        p = Path(path)
        if SKIP.search(path) or not p.is_file() or (p.suffix not in SUFFIXES and p.name not in NAMES):
            continue
        before = p.read_text(encoding="utf-8")
        after = rewrite(before, path)
        if after != before:
            p.write_text(after, encoding="utf-8")
            changed += 1
    print(f"rewrote {changed} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
