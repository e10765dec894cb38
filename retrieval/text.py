"""Tokenisation for BM25: jieba for Chinese, a technical-word pattern for everything else.

Both the indexed text and the query go through `tokenize`, so whatever it does to one it does
to the other. Chinese runs are cut with `jieba.lcut_for_search` (which also emits the shorter
words inside long ones); single Chinese characters are dropped because as BM25 terms they match
almost everything. Other text is matched by a pattern that keeps `c++`, `c#`, `node.js`, `3.14`,
`at&t` and `50%` whole: jieba's own cut splits `node.js` at the dot.

`index_terms` is what the keyword indexes store and search: `tokenize`'s terms with English words
reduced to their Snowball stem ("dogs" and "dog" -> `dog`, "painting" and "painted" -> `paint`), as
Lucene's English analyzer does. Stemming only the BM25 side keeps `tokenize` usable for what reads
surface words (highlighting, the informative-fact filter).
"""

import logging
import re
import threading
import unicodedata
from functools import lru_cache

from common.once import once

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# A letter or digit of any script except Han (Han runs go to jieba).
_L = rf"[^\W_{_HAN}]"
_TOKEN_RE = re.compile(
    rf"(?P<han>[{_HAN}]+)"
    # ".net": a leading dot only at the start of a word.
    rf"|(?P<word>(?:(?<![\w.])\.(?={_L}))?{_L}+(?:[.+#&_\-]{_L}+)*[+#]*%?)"
)
# "don't" -> "dont", "user's" -> "users": one term instead of a stray "t" / "s".
_APOSTROPHE_RE = re.compile(r"(?<=\w)['\u2019](?=\w)")
_JOINERS_RE = re.compile(r"[.&_\-]")
_DECIMAL_RE = re.compile(r"^\d+(?:\.\d+)*%?$")
# Combining marks are folded away only after Latin, Greek and Cyrillic letters ("café" -> "cafe");
# in Japanese the same category carries the voicing marks, which change the word.
_FOLD_BELOW = 0x0530

# Compact stop lists: function words that carry no topic. Single Chinese characters need no
# entry (they are dropped anyway), so the Chinese list holds only multi-character words.
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves dont doesnt didnt isnt arent wasnt cant wont shouldnt
    im ive youre theyre thats also however thus via per etc eg ie e.g i.e
    我们 你们 他们 她们 它们 咱们 自己 这个 那个 这些 那些 这样 那样 这里 那里 这么 那么 什么 怎么
    怎样 为什么 哪里 哪个 因为 所以 因此 但是 可是 然而 而且 并且 或者 还是 如果 虽然 尽管 即使
    不过 然后 以及 其中 对于 关于 通过 由于 根据 按照 以便 为了 之后 之前 以后 以前 已经 一个
    一些 一种 一样 就是 只是 还有 没有 可以 可能 应该 需要 这种 那种 其他 其它 各种 每个 等等
    """.split()
)

# Bumped whenever index_terms changes what a text is indexed as. The keyword backends put it in
# their table and index names, so an index written with another analysis is never searched with
# this one: after an upgrade the keyword index reads as empty, `manage.py reconcile` reports its
# rows missing, and `reconcile --repair` (or `reindex`) writes them again. 1: no stemming.
ANALYZER_GENERATION = 2

def _cutter():
    """Load jieba once per process, quietly (it prints its dictionary loading to stderr)."""
    return once(("retrieval.text", "jieba"), _load_jieba)


def _load_jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def _fold(word: str) -> str:
    if word.isascii():
        return word
    out = []
    for ch in unicodedata.normalize("NFD", word):
        if unicodedata.category(ch) == "Mn" and out and ord(out[-1]) < _FOLD_BELOW:
            continue
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


def _word_terms(word: str) -> list[str]:
    word = _fold(word)
    terms = [word]
    # "node.js" also yields "node" and "js" so a query for either finds it, the way
    # lcut_for_search yields the shorter words inside a long Chinese one. Decimals stay whole,
    # and "c++" has no joiner, so it never turns into "c".
    if _JOINERS_RE.search(word.strip(".")) and not _DECIMAL_RE.match(word):
        terms += [part for part in _JOINERS_RE.split(word) if len(part) >= 2]
    return terms


def tokenize(text: str) -> list[str]:
    """Lowercased BM25 terms of `text`, stop words and punctuation removed, in order."""
    if not text:
        return []
    text = _APOSTROPHE_RE.sub("", unicodedata.normalize("NFKC", text).lower())
    tokens: list[str] = []
    for han, word in _TOKEN_RE.findall(text):
        if han:
            tokens += [w for w in _cutter().lcut_for_search(han) if len(w) >= 2 and w not in STOP_WORDS]
        elif word.isascii() and word.isalnum():  # the common case, without the joiner and accent work
            if word not in STOP_WORDS:
                tokens.append(word)
        else:
            tokens += [t for t in _word_terms(word) if t not in STOP_WORDS]
    return tokens


_stemmer = None
_stemmer_lock = threading.Lock()  # a Snowball stemmer keeps its working string on the instance


@lru_cache(maxsize=65536)
def stem(term: str) -> str:
    """The Snowball English stem of a plain ASCII word; any other term as it is."""
    global _stemmer
    if not (term.isascii() and term.isalpha()):
        return term
    with _stemmer_lock:
        if _stemmer is None:
            import snowballstemmer

            _stemmer = snowballstemmer.stemmer("english")
        return _stemmer.stemWord(term)


def index_terms(text: str) -> list[str]:
    """BM25 terms of `text`: `tokenize` with English words stemmed, for both indexing and querying."""
    return [stem(t) for t in tokenize(text)]


def segment(text: str) -> str:
    """The index terms of `text` joined by spaces: what keyword indexes store and whitespace-analyse."""
    return " ".join(index_terms(text))
