"""The fitted parameters' registry (retrieval/fitted.py): each names a run that exists, and the settings and
module constants it is the default of read it."""

import importlib
import json
import os
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

from retrieval import fitted

ROOT = Path(__file__).resolve().parent.parent
HEADINGS = [line[3:] for line in (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("## ")]
# What each entry is the default of, as loci/search_settings.py exposes it to the code that reads settings.
AS_SETTINGS = {
    "FUSION_EPISODE": "(s.MRAG_LR_W_COS, s.MRAG_LR_W_BM25, s.MRAG_LR_BIAS)",
    "FUSION_FACT": "(s.MRAG_FACT_W_COS, s.MRAG_FACT_W_BM25, s.MRAG_FACT_BIAS)",
    "RELEVANCE_MRAG": "s.SEARCH_RELEVANCE['mrag']",
    "RELEVANCE_CHUNK": "s.SEARCH_RELEVANCE['chunk']",
    "RELEVANCE_BM25": "s.SEARCH_RELEVANCE['bm25']",
    "RELEVANCE_COSINE": "s.SEARCH_RELEVANCE['cosine']",
    "LATE_INTERACTION_MAP": "s.SEARCH_LATE_INTERACTION_MAP",
    "MULTILINGUAL_RERANK_MAP": "s.SEARCH_MULTILINGUAL_RERANK_MAP",
    "MIN_RELEVANCE": "s.MRAG_MIN_RELEVANCE",
    "CROSS_LANGUAGE_COSINE_SHIFT": "s.SEARCH_CROSS_LANGUAGE_COSINE_SHIFT",
    "FACTS_COMPETING": "s.MRAG_FACTS_COMPETING",
}
VARIABLES = [name for entry in AS_SETTINGS for name in fitted.ALL[entry].used_as]


def search_settings(environment: dict[str, str]) -> dict:
    """loci/search_settings.py's reading of `environment` (the fitted variables unset but those given), in a
    fresh process: the suite's own settings may carry a developer's .env."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES} | environment
    script = ("import json; import loci.search_settings as s; print(json.dumps({"
              + ", ".join(f"{name!r}: {expr}" for name, expr in AS_SETTINGS.items()) + "}))")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def as_list(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def test_every_entry_names_a_run_that_exists():
    assert set(AS_SETTINGS) | {"TOPIC_THRESHOLD", "DUPLICATE_COSINE", "CJK_SHARE"} == set(fitted.ALL)
    for name, entry in fitted.ALL.items():
        assert entry.results in HEADINGS or any(h.startswith(entry.results) for h in HEADINGS), name
        assert date(2026, 11, 1) <= date.fromisoformat(entry.date) <= date.today(), name
        modules = re.findall(r"python -m bench\.(\w+)", entry.command)
        assert modules and all((ROOT / "bench" / f"{m}.py").is_file() for m in modules), name
        assert entry.fitted_on, name
        if name in AS_SETTINGS:  # one variable per number
            assert len(entry.used_as) == len(as_list(entry.value)), name


def test_the_settings_default_to_the_registry_and_their_variables_override_it():
    defaults = search_settings({})
    assert {name: as_list(value) for name, value in defaults.items()} == {
        name: as_list(fitted.ALL[name].value) for name in AS_SETTINGS}
    # Each variable the registry names moves the element it says it does, and only that one.
    given = {variable: str(n + 2) if variable == "MRAG_FACTS_COMPETING" else f"0.{n + 11}"
             for n, variable in enumerate(VARIABLES)}
    read = search_settings(given)
    for name in AS_SETTINGS:
        assert as_list(read[name]) == [float(given[variable]) for variable in fitted.ALL[name].used_as], name


def test_module_constants_read_the_registry():
    for name in ("TOPIC_THRESHOLD", "DUPLICATE_COSINE", "CJK_SHARE"):
        (where,) = fitted.ALL[name].used_as
        module, _, constant = where.rpartition(".")
        assert getattr(importlib.import_module(module), constant) == fitted.ALL[name].value
