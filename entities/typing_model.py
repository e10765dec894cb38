"""The type of a named mention, read by a small learned model: person, place, organization, work, other.

The rules of entities/extraction.py find the mentions (spans of capitalised words, jieba's proper
nouns, titles in quotes and 《》) and type them by cues; this model re-types each one from features
of the mention in its context, the rules' own type being one feature among the others:

- the mention: its words, first and last word, whole key, shape, length, affixes, characters
  (Chinese: each character, the first and last one or two), quoting;
- the lists the rules use: a given name first, a gazetteer place, an organisation or place word, a title;
- the context: up to three tokens left and right (a word, or a Chinese character), by position and as a bag;
- the rules' type and jieba's part-of-speech flag.

Each feature is hashed (crc32) into one of `buckets` rows of an embedding, the rows summed, then two
dense layers (ReLU) and a softmax over the five types. Trained by bench/train_entity_types.py on
templated mentions (its card, entities/models/entity_types.md, gives data, seed and sha256); numpy at
run time, a few microseconds a mention.
"""

import json
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from entities.resolution import TITLES, entity_key

MODEL_PATH = Path(__file__).with_name("models") / "entity_types.npz"
TYPES = ("person", "place", "organization", "work", "other")
MAX_FEATURES = 64
# The model's type replaces a type the rules gave (from a cue) only where its softmax probability is
# at least this; a mention the rules left untyped always takes the model's type. 0 would let the model
# decide everything; 0.9 was chosen on bench/entities.py's dev and held-out parts (0, 0.7, 0.9, 0.97,
# 1.01 tried: 0.9 best on both), never on held-out-2.
MIN_OVERRIDE = 0.9

_CJK = re.compile(r"[\u4e00-\u9fff]")
_TOKEN = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*|\d+|[\u4e00-\u9fff]|[^\s\w]")


def _shape(word: str) -> str:
    if _CJK.search(word):
        return "C"
    return re.sub(r"(.)\1+", r"\1", re.sub(r"[A-Z]", "X", re.sub(r"[a-z]", "x", re.sub(r"\d", "d", word))))[:6]


@dataclass(frozen=True)
class Lists:
    """The name lists and cue words of entities/extraction.py that the features read."""
    given: frozenset
    gazetteer: frozenset
    places: frozenset
    org_words: frozenset
    place_words: frozenset
    ranks: frozenset


def features(text: str, start: int, end: int, rule_type: str, flag: str, lists: Lists) -> list[str]:
    """The features of the mention text[start:end] (see the module's docstring)."""
    surface = text[start:end]
    key = entity_key(surface)
    f = [f"rule:{rule_type or 'none'}", f"flag:{flag[:3]}"]
    if _CJK.search(surface):
        chars = [c for c in surface if not c.isspace()]
        f += [f"c:{c}" for c in chars[:8]]
        f += [f"cf:{chars[0]}", f"cl:{chars[-1]}", f"cl2:{''.join(chars[-2:])}", f"cf2:{''.join(chars[:2])}",
              f"clen:{min(len(chars), 8)}"]
        if "·" in surface or "・" in surface:
            f.append("dot")
        if re.search(r"[A-Za-z]", surface):
            f.append("latin")
    else:
        words = surface.split()
        low = [w.lower().strip(".,'’") for w in words]
        f += [f"w:{w}" for w in low[:6]]
        f += [f"wf:{low[0]}", f"wl:{low[-1]}", f"n:{min(len(words), 5)}",
              f"sh:{' '.join(_shape(w) for w in words[:4])}", f"sl:{low[-1][-3:]}", f"sl2:{low[-1][-2:]}",
              f"pf:{low[0][:3]}"]
        if len(words) == 1:
            f.append(f"sl4:{low[0][-4:]}")
        if low[0] in lists.given:
            f.append("gz:given")
        if len(low) > 1 and low[-1] in lists.given:
            f.append("gz:given_last")
        if low[0].rstrip(".") in TITLES or low[0] in lists.ranks:
            f.append("gz:title")
        if any(w in lists.org_words for w in low):
            f.append("gz:orgword")
        if any(w in lists.place_words for w in low[1:]):
            f.append("gz:placeword")
        if re.search(r"\d", surface):
            f.append("digit")
        if ":" in surface:
            f.append("colon")
        if surface.isupper() and len(surface) > 1:
            f.append("caps")
    if key in lists.places:
        f.append("gz:places")
    if key in lists.gazetteer:
        f.append("gz:gazetteer")
    before, after = text[max(0, start - 40):start], text[end:end + 40]
    if before.endswith(("\"", "“", "《", "'")):
        f.append("quoted")
    left = [t.lower() for t in _TOKEN.findall(before)][-3:][::-1]
    right = [t.lower() for t in _TOKEN.findall(after)][:3]
    for i, t in enumerate(left):
        f += [f"l{i + 1}:{t}", f"lb:{t}"]
    for i, t in enumerate(right):
        f += [f"r{i + 1}:{t}", f"rb:{t}"]
    if len(left) >= 2:
        f.append(f"l21:{left[1]}_{left[0]}")
    if len(right) >= 2:
        f.append(f"r12:{right[0]}_{right[1]}")
    if not left:
        f.append("l:start")
    if not right:
        f.append("r:end")
    return f[:MAX_FEATURES]


CONTEXT = ("l", "r", "quoted")  # prefixes of the context's features (training drops them as a group)
MENTION = ("c:", "cf", "cl", "clen", "w", "sh", "sl", "pf", "n:", "dot", "latin", "digit", "colon", "caps")


def group(feature: str) -> int:
    """0: the rules' type and the lists; 1: the mention's own words and characters; 2: its context."""
    if feature.startswith(CONTEXT):
        return 2
    return 1 if feature.startswith(MENTION) else 0


def feature_ids(feats: list[str], buckets: int) -> np.ndarray:
    """Each feature hashed (crc32: the same in every process) to 1..buckets-1; 0 pads."""
    ids = np.zeros(MAX_FEATURES, dtype=np.int64)
    for j, f in enumerate(feats[:MAX_FEATURES]):
        ids[j] = 1 + zlib.crc32(f.encode()) % (buckets - 1)
    return ids


class TypingModel:
    def __init__(self, path: Path = MODEL_PATH):
        with np.load(path) as z:
            self.w = {k: z[k].astype(np.float32) for k in z.files if k != "meta"}
            self.meta = json.loads(bytes(z["meta"]).decode())
        self.types: list[str] = self.meta["types"]
        self.buckets: int = self.meta["buckets"]

    def logits(self, ids: np.ndarray) -> np.ndarray:
        """Type logits [n, types] of feature ids [n, MAX_FEATURES]."""
        w = self.w
        x = w["embed"][ids].sum(axis=1)  # row 0 of embed is zeros (padding)
        h = np.maximum(np.einsum("ij,kj->ik", x, w["fc1_w"]) + w["fc1_b"], 0)
        return np.einsum("ij,kj->ik", h, w["out_w"]) + w["out_b"]

    def types_of(self, text: str, spans, lists: Lists, min_override: float = 0.0) -> list[str]:
        if not spans:
            return []
        ids = np.stack([feature_ids(features(text, s.start, s.end, s.found.type, s.flag, lists), self.buckets)
                        for s in spans])
        logits = self.logits(ids)
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        out = []
        for s, row in zip(spans, probs):
            best = int(row.argmax())
            keep_rule = s.found.type and row[best] < min_override
            out.append(("other" if s.found.type == "" else s.found.type) if keep_rule else self.types[best])
        return out


@lru_cache(maxsize=1)
def model() -> TypingModel:
    return TypingModel()


def retype(text: str, spans, lists: Lists) -> list[str]:
    """The spans' types by the model. "other" is "" (a name of no known type), as the rules write it,
    unless the rules typed it "other" from a cue ("my dog Mochi")."""
    kinds = model().types_of(text, spans, lists, MIN_OVERRIDE)
    return [("other" if s.found.type == "other" else "") if k == "other" else k for s, k in zip(spans, kinds)]
