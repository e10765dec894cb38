"""Entity mentions in a memory's text, without a model: proper names, dates and amounts.

English: spans of capitalised words ("Matt Patterson", "New York City", "Dr. Smith"); a span
that starts a sentence counts only when it is more than one word or a name the caller already
knows (a chat's speakers, names seen mid-sentence in the same batch): "Yesterday" or "Wow" at the
start of a sentence is capitalised for grammar, not because it is a name, and a possessive is no
proof ("Painting's a fun way"). Chinese: jieba's part-of-speech tags (nr person, ns place, nt
organisation, nz other proper noun, typed "work"). Types come from cues (titles, organisation and
place words, "the book …"); a name with no cue is typed "other" unless resolution knows it as a
person (a speaker). Dates and amounts are typed values (an ISO date; "<number> <unit>").
"""

import logging
import re
import threading
from dataclasses import dataclass
from datetime import date

from entities.resolution import TITLES, entity_key

MAX_NAME_WORDS = 5
MAX_MENTIONS = 40  # per memory: a table row of names is still one fact, not a directory

_CJK = re.compile(r"[\u4e00-\u9fff]")
# A capitalised word, with internal apostrophes, hyphens, dots of initials ("J.K.") and digits ("Mate 60").
_WORD = r"(?:(?:St|Mt|Ft)\.|[A-Z]\.(?:[A-Z]\.)+|[A-Z][\w'’\-]*[\w]|[A-Z]\.?)"
_CONNECTOR = r"(?:(?:of|de|van|von|&|for)(?:\s+the)?)"  # never "and": "Caroline and Melanie" are two
_TITLE_WORD = "|".join(t.title() + r"\.?" for t in TITLES)
_SPAN = re.compile(
    rf"(?<![\w'’])((?:(?:{_TITLE_WORD})\s+)?{_WORD}"
    rf"(?:\s+(?:{_CONNECTOR}\s+)?{_WORD}){{0,{MAX_NAME_WORDS - 1}}})(?:['’]s\b)?"
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\"“(\[\n]\s*|\s[-–—]\s)$")
_QUOTED = re.compile(r"[\"“]([A-Z][^\"”]{1,80})[\"”]")
# Capitalised for grammar or by convention, never a name on their own.
_NOT_NAMES = frozenset(
    """
    i i'm i've i'll i'd a an the this that these those it its he she we they you my your our their his her
    hey hi hello wow oh ok okay yes no yeah yep nope thanks thank please sorry well so and but or if
    what when where who why how which also just really very great good nice awesome cool sure lol omg
    monday tuesday wednesday thursday friday saturday sunday january february march april may june july
    august september october november december today yesterday tomorrow tonight mom dad
    did do does is are was were am be been can could will would shall should may might must have has had
    let let's here there then now maybe perhaps anyway guess btw
    """.split()
)
_MONTHS = {m: i for i, m in enumerate(
    "january february march april may june july august september october november december".split(), start=1)}
_ORG_WORDS = frozenset(
    "inc inc. ltd ltd. llc corp corp. corporation company co. group university college school institute academy "
    "association society foundation club bank hospital agency ministry department council committee church "
    "center centre team league museum library".split()
)
_PLACE_WORDS = frozenset(
    "city town village county state province country island islands river lake mountain mountains mount park "
    "street st. road avenue beach bay valley forest desert sea ocean coast".split()
)
_WORK_CUES = re.compile(
    r"\b(?:book|novel|movie|film|song|album|show|series|game|painting|poem|play|app|called|titled|named|read|"
    r"watched|watching|reading)\s+[\"“]?$", re.I)
_PLACE_CUES = re.compile(r"\b(?:in|to|from|at|near|visited|visit|visiting|moved to|trip to)\s+$", re.I)
_DATE_DMY = re.compile(r"\b(\d{1,2})\s+(" + "|".join(m.title() for m in _MONTHS) + r")\s+(\d{4})\b")
_DATE_MDY = re.compile(r"\b(" + "|".join(m.title() for m in _MONTHS) + r")\s+(\d{1,2}),?\s+(\d{4})\b")
_DATE_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DATE_ZH = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})[日号]")
_CURRENCY = {"$": "USD", "US$": "USD", "€": "EUR", "£": "GBP", "¥": "CNY", "￥": "CNY", "RMB": "CNY"}
_AMOUNT_SYMBOL = re.compile(r"(US\$|\$|€|£|¥|￥)\s?(\d[\d,]*(?:\.\d+)?)\s*(million|billion|thousand|k|m|bn)?\b", re.I)
_AMOUNT_CODE = re.compile(
    r"\b(\d[\d,]*(?:\.\d+)?)\s*(million|billion|thousand)?\s*(USD|EUR|GBP|CNY|RMB|dollars|euros)\b", re.I)
_AMOUNT_ZH = re.compile(r"(\d+(?:\.\d+)?)\s*(万|亿)?\s*(元|美元|人民币|欧元)")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s?(%|percent\b|％)")
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9, "万": 1e4, "亿": 1e8}
_ZH_FLAGS = {"nr": "person", "ns": "place", "nt": "organization", "nz": "work"}
_posseg = None
_posseg_lock = threading.Lock()


@dataclass(frozen=True)
class Found:
    surface: str
    type: str  # an Entity.Type value; "" when the text gives no cue
    value: str = ""  # dates and amounts


def find_mentions(text: str, known: frozenset[str] = frozenset()) -> list[Found]:
    """The entity mentions of one text. `known` holds the keys of names that count at a sentence's start too."""
    found: list[Found] = []
    if _CJK.search(text):
        found += _chinese(text)
    found += _english(text, known)
    found += dates(text) + amounts(text)
    return list(dict.fromkeys(found))[:MAX_MENTIONS]


def mid_sentence_names(texts) -> set[str]:
    """Keys of the names written capitalised mid-sentence in `texts`: proof that they are names."""
    keys = set()
    for text in texts:
        for m in _SPAN.finditer(text):
            if not _SENTENCE_START.search(text[: m.start()]) and _plausible(m.group(1)):
                keys.add(entity_key(m.group(1)))
    return keys


def _english(text: str, known: frozenset[str]) -> list[Found]:
    out = []
    for m in _QUOTED.finditer(text):  # "Nothing is Impossible", a title in quotes
        out.append(Found(m.group(1).strip(" ,.!?"), "work"))
    for m in _SPAN.finditer(text):
        surface = m.group(1)
        if not _plausible(surface):
            continue
        before = text[: m.start()]
        if _SENTENCE_START.search(before):
            # Not a possessive alone: "Painting's a fun way" is a contraction at a sentence's start.
            if " " not in surface.strip() and entity_key(surface) not in known:
                continue
            if surface.split()[0].lower() in _NOT_NAMES:  # "The Beatles" stays; "The kids" was never a span
                surface = surface.split(" ", 1)[1] if " " in surface else ""
                if not surface or not _plausible(surface):
                    continue
        out.append(Found(surface, _english_type(surface, before)))
    return out


def _plausible(surface: str) -> bool:
    words = surface.split()
    if all(entity_key(w) in _NOT_NAMES for w in words):
        return False
    return len(entity_key(surface)) >= 2


def _english_type(surface: str, before: str) -> str:
    words = [w.lower() for w in surface.split()]
    if words[0].rstrip(".") in TITLES:
        return "person"
    if any(w in _ORG_WORDS for w in words):
        return "organization"
    if any(w in _PLACE_WORDS for w in words[1:]):
        return "place"
    if _WORK_CUES.search(before[-30:]):
        return "work"
    if _PLACE_CUES.search(before[-20:]):
        return "place"
    return ""


def _chinese(text: str) -> list[Found]:
    out = []
    for word, flag in _pos_tagged(text):
        kind = _ZH_FLAGS.get(flag[:2])
        if kind and len(word) >= 2 and _CJK.search(word):
            out.append(Found(word, kind))
    return out


def _pos_tagged(text: str):
    global _posseg
    if _posseg is None:
        with _posseg_lock:
            if _posseg is None:
                import jieba
                import jieba.posseg

                jieba.setLogLevel(logging.WARNING)
                _posseg = jieba.posseg
    return [(p.word, p.flag) for p in _posseg.cut(text)]


def dates(text: str) -> list[Found]:
    out = []
    for m in _DATE_DMY.finditer(text):
        out.append(_date(m.group(0), int(m.group(3)), _MONTHS[m.group(2).lower()], int(m.group(1))))
    for m in _DATE_MDY.finditer(text):
        out.append(_date(m.group(0), int(m.group(3)), _MONTHS[m.group(1).lower()], int(m.group(2))))
    for m in (*_DATE_ISO.finditer(text), *_DATE_ZH.finditer(text)):
        out.append(_date(m.group(0), int(m.group(1)), int(m.group(2)), int(m.group(3))))
    return [f for f in out if f]


def _date(surface: str, year: int, month: int, day: int) -> Found | None:
    try:
        return Found(surface, "date", date(year, month, day).isoformat())
    except ValueError:
        return None  # "31 February": not a date


def amounts(text: str) -> list[Found]:
    out = []
    for m in _AMOUNT_SYMBOL.finditer(text):
        out.append(_amount(m.group(0), m.group(2), m.group(3), _CURRENCY[m.group(1).upper()]))
    for m in _AMOUNT_CODE.finditer(text):
        code = m.group(3).upper()
        out.append(_amount(m.group(0), m.group(1), m.group(2), {"DOLLARS": "USD", "EUROS": "EUR", "RMB": "CNY"}.get(
            code, code)))
    for m in _AMOUNT_ZH.finditer(text):
        unit = {"美元": "USD", "欧元": "EUR"}.get(m.group(3), "CNY")
        out.append(_amount(m.group(0), m.group(1), m.group(2), unit))
    for m in _PERCENT.finditer(text):
        out.append(_amount(m.group(0), m.group(1), None, "%"))
    return [f for f in out if f]


def _amount(surface: str, number: str, scale: str | None, unit: str) -> Found | None:
    try:
        value = float(number.replace(",", "")) * _SCALE.get((scale or "").lower(), 1)
    except ValueError:
        return None
    shown = f"{value:.2f}".rstrip("0").rstrip(".")
    return Found(surface.strip(), "amount", f"{shown} {unit}")
