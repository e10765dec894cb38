"""The deterministic extractor keeps the same facts whatever the interpreter's hash seed."""

import os
import subprocess
import sys
from pathlib import Path

# Thirty candidates with the same document frequencies under different words: equal on paper, so only
# the order of the float additions inside `capped` can separate them, and that order must not follow
# the process's PYTHONHASHSEED.
_PROGRAM = """
from extraction.candidates import Candidate, capped
cands, fill = [], 0
groups = [[f"a{g}{k}" for k in range(5)] for g in range(30)]
for words in groups:
    cands.append(Candidate(" ".join(words), " ".join(words), [], len(cands), tokens=list(words)))
for words in groups:
    for k, w in enumerate(words):
        for _ in range(k * 3):
            cands.append(Candidate(w, w, [], len(cands), tokens=[w, f"f{fill}"]))
            fill += 1
print([c.position for c in capped(cands, 15) if c.position < 30])
"""


def _kept_under(seed: int) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, "-c", _PROGRAM], env=env, capture_output=True, text=True,
                          check=True, timeout=60).stdout


def test_it_caps_candidates_the_same_way_under_every_hash_seed():
    assert len({_kept_under(seed) for seed in (1, 2, 3, 4)}) == 1
