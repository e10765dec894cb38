"""What a statement says, read by a small learned model: its kind, and the subject's slots and values.

One grammar for conversation memory: supersede (claims.py) and profiles (profile_rules.py) both read
`read(text, subject)`. The model (conversations/models/statements.npz, trained by
bench/train_statements.py; its card beside it gives source, licence, data, seed and sha256) is a
hashed-feature token encoder — each token's word, shape, affixes, characters and the existing rule
lexicons (kin, pet and job words, given names, places) summed into a vector — two 1-D convolutions
over the sentence, and three heads:

- `kind`: state_change, plan, habit, preference, biographical, other (the sentence's max-pooled state);
- per token, BIO tags of the *subject's own* slots: employer, title, location, partner (each also as a
  value that stopped holding, "quit Contoso" → employer Contoso, ended), origin, family, pet, like,
  dislike, plan — "my sister works at Contoso" tags the sister, not an employer;
- `ends`: the statement ends the subject's current employer / title / location / partner without
  naming it ("I quit my job", "我辞职了").

A second, small head reads the statement's e5-small sentence vector (the one ingestion computes for
the vector index anyway): which single-valued slot it `holds` and which it `changes` ("we finally
moved to Denver", "我换工作了"). It carries to paraphrases and to the other language where the
hashed token features meet unknown words, and applies only where the default embedder is the bundled
e5-small (`head_applies`): another embedder's vectors mean nothing to it.

Runs in numpy, about 0.1 ms a statement; tokens are jieba's for text with Chinese, a word pattern
otherwise. The subject (the fact's `subject`, the name the extractor wrote for "I") is a feature:
the model tags only what holds for the subject.
"""

import json
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from retrieval.embeddings.identity import configured_model
from retrieval.text import _cutter

MODEL_PATH = Path(__file__).with_name("models") / "statements.npz"
FEATURES_PER_TOKEN = 14
SINGLE_VALUED = ("employer", "title", "location", "partner")
# A slot value is read only where the model is this sure of its first token's tag (softmax); below it
# the token is O. 0.5 is the argmax's own floor for a two-way choice: no tuning (bench/RESULTS.md).
MIN_TAG_PROBABILITY = 0.5
MIN_ENDS_PROBABILITY = 0.5
MIN_HEAD_PROBABILITY = 0.5

_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*|\d+(?:[:.]\d+)*|[^\sA-Za-z\d]")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_FIRST_PERSON = {"i", "me", "my", "mine", "myself", "我", "我们"}
_KIN = set(("husband wife partner boyfriend girlfriend fiance fiancee son sons daughter daughters kids children mom "
            "mum mother dad father parents sister sisters brother brothers grandma grandmother grandpa grandfather "
            "grandparents grandkids grandchildren cousin cousins aunt uncle niece nephew stepmom stepdad in-laws twin "
            "姐姐 妹妹 哥哥 弟弟 妈妈 爸爸 母亲 父亲 老婆 老公 妻子 丈夫 儿子 女儿 奶奶 爷爷 外婆 外公 舅舅 阿姨 叔叔 "
            "表哥 表姐 表妹 表弟 父母 孩子 家人").split())
_PET = set(("dog dogs cat cats puppy kitten pup bird parrot hamster rabbit bunny fish turtle horse lizard goldfish "
            "狗 猫 小狗 小猫 狗狗 猫咪 兔子 鹦鹉 仓鼠 乌龟 金鱼").split())
_JOB = set(("teacher nurse doctor engineer developer programmer designer artist writer author musician chef baker "
            "lawyer accountant counselor therapist student scientist researcher manager consultant photographer "
            "officer pilot dancer coach trainer vet mechanic carpenter farmer entrepreneur founder intern analyst "
            "director editor professor architect 工程师 经理 设计师 会计 护士 医生 律师 老师 教师 销售 程序员 "
            "分析师 编辑 记者 翻译 厨师 研究员 教授 实习生 总监").split())
_MOVE = set(("quit left resigned moved relocated joined started became promoted fired laid retired switched "
             "no longer anymore now new former used 离职 辞职 跳槽 搬 搬到 搬去 入职 加入 升职 转行 退休 "
             "不再 已经 现在 以前 分手 离婚").split())


@dataclass(frozen=True)
class Slot:
    type: str  # employer, title, location, partner, origin, family, pet, like, dislike, plan
    value: str  # as written in the statement
    ended: bool = False  # a value that stopped holding ("quit Contoso", "moved out of Boston")

    @property
    def key(self) -> str:
        return normalise(self.value)


@dataclass(frozen=True)
class Statement:
    kind: str
    slots: tuple[Slot, ...] = ()
    ends: tuple[str, ...] = ()  # single-valued types whose current value this statement ends unnamed

    def current(self, slot_type: str) -> list[Slot]:
        return [s for s in self.slots if s.type == slot_type and not s.ended]

    def current_values(self) -> list[Slot]:
        """The current values of single-valued slots."""
        return [s for s in self.slots if s.type in SINGLE_VALUED and not s.ended]


@dataclass(frozen=True)
class Reading:
    """What the e5 head reads in one statement's vector."""
    kind: str
    holds: tuple[str, ...]  # single-valued slots the statement gives the subject a current value of
    changes: tuple[str, ...]  # single-valued slots the statement says changed (a new value, or an end)


def normalise(value: str) -> str:
    value = re.sub(r"^(?:an?|the|my|their|his|her|one|new|一只|一个|一名|一位)\s*", "", value.strip(), flags=re.I)
    return re.sub(r"[\W_]+", " ", value.lower()).strip()


# --- tokens and features (shared with bench/train_statements.py: training and run time are one code) ---


def tokens(text: str) -> list[tuple[str, int, int]]:
    """(token, start, end): jieba's cut where the text has Chinese, a word pattern otherwise."""
    if _CJK.search(text):
        return [(w, s, e) for w, s, e in _cutter().tokenize(text) if w.strip()]
    return [(m.group(0), m.start(), m.end()) for m in _WORD.finditer(text)]


@lru_cache(maxsize=1)
def _gazetteers() -> tuple[frozenset, frozenset]:
    data = Path(__file__).resolve().parents[1] / "entities" / "data"
    names = frozenset(n.strip() for n in (data / "given_names.txt").read_text().split("\n") if n.strip())
    places = frozenset(p.strip() for p in (data / "places.txt").read_text().split("\n") if p.strip())
    return names, places


def _shape(word: str) -> str:
    if _CJK.search(word):
        return "C"
    s = re.sub(r"[A-Z]+", "X", re.sub(r"[a-z]+", "x", re.sub(r"\d+", "d", word)))
    return s[:4]


def token_features(toks: list[tuple[str, int, int]], subject: str) -> list[list[str]]:
    names, places = _gazetteers()
    subject_words = {w.lower() for w in re.findall(r"\w+", subject)} if subject else set()
    out = []
    for i, (word, _, _) in enumerate(toks):
        low = word.lower()
        f = [f"w:{low}", f"s:{_shape(word)}"]
        if _CJK.search(word):
            f += [f"c:{c}" for c in word[:4]]
            if len(word) > 1:
                f.append(f"ce:{word[-1]}")
        elif len(low) > 3:
            f += [f"p:{low[:3]}", f"x:{low[-3:]}"]
        if low in _FIRST_PERSON or (subject_words and low in subject_words):
            f.append("subj")
        if i == 0:
            f.append("first")
        if low in names:
            f.append("gz:name")
        if low in places:
            f.append("gz:place")
        if low in _KIN:
            f.append("gz:kin")
        if low in _PET:
            f.append("gz:pet")
        if low in _JOB or low.rstrip("s") in _JOB:
            f.append("gz:job")
        if low in _MOVE:
            f.append("gz:move")
        out.append(f[:FEATURES_PER_TOKEN])
    return out


def feature_ids(features: list[list[str]], buckets: int) -> np.ndarray:
    """Each feature hashed (crc32: the same in every process, unlike hash()) to 1..buckets-1; 0 pads."""
    ids = np.zeros((len(features), FEATURES_PER_TOKEN), dtype=np.int64)
    for i, row in enumerate(features):
        for j, f in enumerate(row):
            ids[i, j] = 1 + zlib.crc32(f.encode()) % (buckets - 1)
    return ids


# --- the model, in numpy ----------------------------------------------------------------------


class StatementModel:
    def __init__(self, path: Path = MODEL_PATH):
        with np.load(path) as z:
            self.w = {k: z[k].astype(np.float32) for k in z.files if k != "meta"}
            self.meta = json.loads(bytes(z["meta"]).decode())
        self.tags: list[str] = self.meta["tags"]
        self.classes: list[str] = self.meta["classes"]
        self.ends: list[str] = self.meta["ends"]
        self.buckets: int = self.meta["buckets"]

    def forward(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tag logits [n, tags], class logits [classes], ends logits [ends] of one sentence's feature ids."""
        w = self.w
        x = w["embed"][ids].sum(axis=1)  # [n, d]; row 0 of embed is zeros (padding)
        h1 = np.maximum(_conv(x, w["conv1_w"], w["conv1_b"], 1), 0)
        h = h1 + np.maximum(_conv(h1, w["conv2_w"], w["conv2_b"], 2), 0)
        pooled = h.max(axis=0)
        return (_matmul(h, w["tag_w"].T) + w["tag_b"], w["cls_w"] @ pooled + w["cls_b"],
                w["ends_w"] @ pooled + w["ends_b"])

    def read(self, text: str, subject: str = "") -> Statement:
        toks = tokens(text)
        if not toks:
            return Statement("other")
        tag_logits, cls_logits, ends_logits = self.forward(feature_ids(token_features(toks, subject), self.buckets))
        probs = _softmax(tag_logits)
        best = probs.argmax(axis=1)
        slots, current = [], None  # current: [type, start, end]
        for i, (_, start, end) in enumerate(toks):
            tag = self.tags[best[i]]
            if tag == "O" or probs[i, best[i]] < MIN_TAG_PROBABILITY:
                current = _close(slots, current, text)
                continue
            edge, kind = tag.split("-", 1)
            if edge == "I" and current is not None and current[0] == kind:
                current[2] = end
            else:
                current = _close(slots, current, text)
                current = [kind, start, end]
        _close(slots, current, text)
        # The subject is never its own value: "Sam and Alex broke up" ends Sam, not Alex.
        slots = [s for s in slots if s.key not in {normalise(subject), "i", "me", "we", "我", "我们"}]
        ends = tuple(e for e, p in zip(self.ends, _sigmoid(ends_logits)) if p >= MIN_ENDS_PROBABILITY)
        return Statement(self.classes[int(cls_logits.argmax())], tuple(slots), ends)


    def readings(self, vectors: np.ndarray) -> list[Reading]:
        """The e5 head's reading of each statement's e5-small vector (rows of `vectors`)."""
        w, n = self.w, len(self.classes)
        hidden = np.maximum(_matmul(np.asarray(vectors, dtype=np.float32), w["head1_w"].T) + w["head1_b"], 0)
        logits = _matmul(hidden, w["head2_w"].T) + w["head2_b"]
        probs = _sigmoid(logits[:, n:])
        k = len(self.ends)
        return [Reading(self.classes[int(row[:n].argmax())],
                        tuple(t for t, p in zip(self.ends, p_row[:k]) if p >= MIN_HEAD_PROBABILITY),
                        tuple(t for t, p in zip(self.ends, p_row[k:]) if p >= MIN_HEAD_PROBABILITY))
                for row, p_row in zip(logits, probs)]


def _close(slots: list, current, text: str):
    if current is not None:
        kind, start, end = current
        value = text[start:end].strip(" ,.;:!?，。；：！？")
        if value:
            slots.append(Slot(kind.removesuffix("_x"), value, kind.endswith("_x")))
    return None


def _conv(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, dilation: int) -> np.ndarray:
    """A 'same' 1-D convolution over tokens: weight [out, in, k] as torch's Conv1d."""
    k = weight.shape[2]
    pad = dilation * (k - 1) // 2
    padded = np.pad(x, ((pad, pad), (0, 0)))
    n = x.shape[0]
    cols = np.concatenate([padded[j * dilation: j * dilation + n] for j in range(k)], axis=1)  # [n, k*in]
    flat = weight.transpose(0, 2, 1).reshape(weight.shape[0], -1)  # [out, k*in], tap-major like cols
    return _matmul(cols, flat.T) + bias


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b without BLAS: these matrices are small, and OpenBLAS's threads wait for a busy core's
    timeslice — 8 ms instead of 0.2 ms per statement on a loaded two-core machine (bench/RESULTS.md)."""
    return np.einsum("ij,jk->ik", a, b)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(z, -60, 60)))  # a logit of -100 overflows exp in float32


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@lru_cache(maxsize=1)
def model() -> StatementModel:
    return StatementModel()


@lru_cache(maxsize=8192)  # consolidation reads a user's older facts once per superseding statement
def read(text: str, subject: str = "") -> Statement:
    """What `text` says about `subject` (a name, or "" when the statement is in the first person)."""
    return model().read(text, subject)


def readings(vectors: np.ndarray) -> list[Reading]:
    """The e5 head's reading of statements from their e5-small vectors (see head_applies)."""
    return model().readings(vectors)


def head_applies() -> bool:
    """Whether the default embedder's vectors are the ones the e5 head was trained on (bundled e5-small)."""
    return configured_model("default").startswith("e5-small@")
