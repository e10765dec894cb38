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
from functools import lru_cache
from pathlib import Path
from datetime import date

from entities import typing_model
from entities.resolution import TITLES, entity_key

MAX_NAME_WORDS = 5
MAX_MENTIONS = 40  # per memory: a table row of names is still one fact, not a directory

_CJK = re.compile(r"[\u4e00-\u9fff]")
# A capitalised word, with internal apostrophes, hyphens, dots of initials ("J.K.") and digits ("Mate 60").
# Latin letters only: "Mochi每天早上都要去公园散步" is the name Mochi and a Chinese sentence, not one word.
_L = r"[^\W\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]"
_WORD = rf"(?:(?:St|Mt|Ft)\.|[A-Z]\.(?:[A-Z]\.)+|[A-Z](?:{_L}|['’\-])*{_L}|[A-Z]\.?)"
_CONNECTOR = r"(?:(?:of|de|van|von|&|for)(?:\s+the)?)"  # never "and": "Caroline and Melanie" are two
_TITLE_WORD = "|".join(t.title() + r"\.?" for t in TITLES)
_SPAN = re.compile(
    rf"(?<![\w'’])((?:(?:{_TITLE_WORD})\s+)?{_WORD}"
    # Spaces, not line breaks: a table's header row and its first row are not one name ("Owner\nQuarterly").
    rf"(?:[ \t]+(?:{_CONNECTOR}[ \t]+)?{_WORD}){{0,{MAX_NAME_WORDS - 1}}})(?:['’]s\b)?"
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
# Words of documents and chats that are capitalised as headers, labels or a sentence's first word but
# name nothing: a span made only of these ("Page", "Period", "Test Email", "In", "With") is no entity.
_GENERIC = frozenset(
    """
    in on at by for of to from with into over under after before during since until per via about as than
    not nor yet all any each every some no none other others more most less few many much both either
    page pages period periods section sections chapter table figure fig total subtotal totals name names date dates
    type types description status note notes summary item items quantity qty amount price value values title
    number id code category year years month months day days week weeks quarter revenue revenues sales cost
    costs income profit loss balance segment segments region unit units rate ratio percent change growth source
    sources reference references contents introduction conclusion appendix index overview background results
    result discussion method methods abstract keywords author authors version updated created subject cc sent
    received attachment attachments re fw fwd dear regards best sincerely team address phone email e-mail fax
    website zip yes done pending open closed new old first last next previous back home menu search login help
    contact privacy terms policy copyright rights reserved example examples data info information details step
    steps task tasks issue issues question questions answer answers comment comments average mean median min max
    count sum list row column header footer image photo picture chart graph link file files folder document
    report form field fields label text content body message welcome click read see budget review owner owners
    inc ltd llc corp act rule rules trading common installation install usage license faq qa q&a q1 q2 q3 q4 tbd n/a na misc
    chef rpg test important points roses violets sundays mondays tuesdays wednesdays thursdays fridays saturdays
    morning evening night afternoon weekend weekends spring summer autumn fall winter
    """.split()
)
# Titles of rank before a name ("Prince Vasili Kuragin", "Empress Marya Fedorovna"): a person.
_RANKS = frozenset(
    "prince princess king queen emperor empress count countess duke duchess lord lady baron baroness general "
    "captain colonel major president senator governor mayor pope saint uncle aunt".split())
_ORG_WORDS = frozenset(
    "inc inc. ltd ltd. llc corp corp. corporation company co. group university college school institute academy "
    "association society foundation club bank hospital agency ministry department council committee church "
    "center centre team league museum library technologies technology systems solutions labs software games gaming "
    "media studios studio partners capital holdings networks airlines motors consulting services industries "
    "enterprises logistics pharmaceuticals electronics communications insurance entertainment airways foods "
    "records publishing".split()
)
_PLACE_WORDS = frozenset(
    "city town village county state province country island islands river lake mountain mountains mount park "
    "street st. road avenue beach bay valley forest desert sea ocean coast falls springs heights hills canyon "
    "harbor harbour square plaza airport station".split()
)
_PLACE_FIRST = frozenset("fort mount mt. st. lake port san santa los las new north south east west".split())
# A few places a chat names with no cue ("first Tokyo and then Kyoto"): countries, US states and large
# cities. A gazetteer, not a model: what is not on it keeps the cue-based type.
_PLACES = frozenset(
    """
    afghanistan argentina australia austria bangladesh belgium brazil canada chile china colombia cuba denmark
    egypt england finland france germany greece india indonesia iran iraq ireland israel italy japan kenya korea
    mexico morocco nepal netherlands nigeria norway pakistan peru philippines poland portugal russia scotland
    singapore spain sweden switzerland taiwan thailand turkey ukraine vietnam wales europe asia africa america
    alabama alaska arizona arkansas california colorado connecticut delaware florida georgia hawaii idaho illinois
    indiana iowa kansas kentucky louisiana maine maryland massachusetts michigan minnesota mississippi missouri
    montana nebraska nevada ohio oklahoma oregon pennsylvania tennessee texas utah vermont virginia washington
    wisconsin wyoming midwest
    london paris berlin madrid rome moscow beijing shanghai tokyo kyoto osaka seoul delhi mumbai sydney
    melbourne toronto vancouver montreal chicago boston seattle denver austin dallas houston atlanta miami
    tampa orlando phoenix portland detroit philadelphia brooklyn manhattan sacramento genoa lucca vienna prague
    amsterdam dublin lisbon athens istanbul dubai bangkok hong kong
    """.split()
) | {"new york", "los angeles", "san francisco", "las vegas", "san diego", "new jersey", "hong kong", "st. petersburg",
     "north carolina", "south carolina", "new mexico", "rhode island", "washington dc", "new zealand",
     "south korea", "united states", "united kingdom"}
_US_STATE_CODES = frozenset("al ak az ar ca co ct de fl ga hi id il in ia ks ky la me md ma mi mn ms mo mt ne nv nh nj "
                            "nm ny nc nd oh ok or pa ri sc sd tn tx ut vt va wa wv wi wy".split())
_ORG_AFTER = re.compile(r"^,?\s+(?:Inc|Ltd|LLC|Corp|Co|GmbH|plc|S\.A|AG)\b\.?")
_ORG_CUES = re.compile(r"\b(?:works?|worked|working|job|jobs|interned?|internship|employed|hired|joined|joining|"
                       r"started|position|role)\s+(?:(?:at|for|by|with)\s+)$", re.I)
_PERSON_CUES = re.compile(r"(?:\b(?:from|by|friend|manager|boss|sister|brother|mom|dad|wife|husband|son|"
                          r"daughter|colleague|coworker|partner|owner|author|dear|hi|hey|thanks|thank you)\s*:?\s+)$", re.I)
_PET_CUES = re.compile(r"\b(?:dog|puppy|cat|kitten|pet|bird|parrot|hamster|rabbit|bunny|turtle|horse|pony)"
                       r"(?:,|\s+(?:named|called))?\s+$", re.I)
_WORK_CUES = re.compile(
    r"\b(?:book|novel|movie|film|song|album|show|series|game|games|painting|poem|play|playing|played|app|titled|"
    r"read|watched|watching|reading|local)\s+[\"“]?$", re.I)
# A brand: a name before the thing it sells or signs ("the Ikea sofa", "the Nike and Gatorade deals") or
# after a deal's words ("in talks with Gatorade", "brands like Nike").
_BRAND_AFTER = re.compile(r"^(?:['’]s)?\s+(?:and\s+[A-Z][\w&-]+\s+)?(?:deals?|sponsorships?|brand|stores?|products?|"
                          r"shoes|sneakers|gear|sofa|couch|app|phone|laptop|headphones)\b")
_BRAND_BEFORE = re.compile(r"\b(?:brands?|sponsors?|sponsored by|talks with|signed(?: up| with)?|deal with|"
                           r"partnered with|shop(?:ping)? at|bought (?:it )?(?:from|at))\s+(?:like\s+|such as\s+)?$", re.I)
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
# Name lists from registry packages (bench/entity_lists.py says which, and their licences): given
# names tell a person from a title or a brand ("Game of Thrones", "Under Armour" are no one); places name
# a city jieba tags as a person (西雅图, 艾尔帕索 are nr) or a chat names with no cue.
_DATA = Path(__file__).with_name("data")


@lru_cache(maxsize=1)
def _given_names() -> frozenset[str]:
    return frozenset((_DATA / "given_names.txt").read_text().split())


@lru_cache(maxsize=1)
def _gazetteer() -> frozenset[str]:
    return frozenset(line for line in (_DATA / "places.txt").read_text().splitlines() if line)


@lru_cache(maxsize=1)
def name_lists() -> typing_model.Lists:
    """The lists above, as the learned typer reads them."""
    return typing_model.Lists(_given_names(), _gazetteer(), _PLACES, _ORG_WORDS, _PLACE_WORDS, _RANKS)


_SINGLE_GIVEN = True
_posseg = None
_posseg_lock = threading.Lock()


@dataclass(frozen=True)
class Found:
    surface: str
    type: str  # an Entity.Type value; "" when the text gives no cue
    value: str = ""  # dates and amounts


@dataclass(frozen=True)
class Span:
    """A named mention where the text has it, typed by the rules: what the learned typer reads."""
    found: Found
    start: int
    end: int
    flag: str = ""  # jieba's part-of-speech flag (Chinese), "quote" for a title in quotes or 《》


# Who decides a named mention's type: "rules" (the cues below) or "model" (entities/typing_model.py,
# which reads the rules' type as one feature among the mention's words and context).
TYPER = "rules"


def find_mentions(text: str, known: frozenset[str] = frozenset()) -> list[Found]:
    """The entity mentions of one text. `known` holds the keys of names that count at a sentence's start too."""
    spans = mention_spans(text, known)
    if TYPER == "model" and spans:
        kinds = typing_model.retype(text, spans, name_lists())
        found = [Found(s.found.surface, kind, s.found.value) for s, kind in zip(spans, kinds)]
    else:
        found = [s.found for s in spans]
    found += dates(text) + amounts(text)
    return list(dict.fromkeys(found))[:MAX_MENTIONS]


def mention_spans(text: str, known: frozenset[str] = frozenset()) -> list["Span"]:
    """The named mentions of one text with where they are and the rules' type (before any model)."""
    spans: list[Span] = []
    if _CJK.search(text):
        spans += _chinese(text)
    spans += _english(text, known)
    return spans


def mid_sentence_names(texts) -> set[str]:
    """Keys of the names written capitalised mid-sentence in `texts`: proof that they are names."""
    keys = set()
    for text in texts:
        for m in _SPAN.finditer(text):
            if not _SENTENCE_START.search(text[: m.start()]) and _plausible(m.group(1)):
                keys.add(entity_key(m.group(1)))
    return keys


def _english(text: str, known: frozenset[str]) -> list[Span]:
    out = []
    for m in _QUOTED.finditer(text):  # "Nothing is Impossible", a title in quotes
        surface = m.group(1).strip(" ,.!?")
        out.append(Span(Found(surface, "work"), m.start(1), m.start(1) + len(surface), "quote"))
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
        start = m.end(1) - len(surface)
        out.append(Span(Found(surface, _english_type(surface, before, text[m.end():m.end() + 40])), start, m.end(1)))
    return out


def _plausible(surface: str) -> bool:
    words = surface.split()
    if all(entity_key(w) in _NOT_NAMES or entity_key(w) in _GENERIC for w in words):
        return False
    if len(words) == 1 and entity_key(surface) in _RANKS:
        return False  # "Well, Prince, so…": a form of address, not a name
    return len(entity_key(surface)) >= 2


def _english_type(surface: str, before: str, after: str = "") -> str:
    words = [w.lower() for w in surface.split()]
    key = entity_key(surface)
    if (words[0].rstrip(".") in TITLES or words[0] in _RANKS) and not any(w in _PLACE_WORDS for w in words[1:]):
        return "person"  # not "King Street West"
    if any(w in _ORG_WORDS for w in words) or _ORG_AFTER.match(after):
        return "organization"
    if any(w in _PLACE_WORDS for w in words[1:]) or (len(words) > 1 and words[0] in _PLACE_FIRST):
        return "place"
    if key in _PLACES or (key in _US_STATE_CODES and surface.isupper() and re.search(r",\s*$", before[-3:])):
        return "place"
    if _PET_CUES.search(before[-20:]):
        return "other"  # "my dog Mochi": a name, of no person
    if _WORK_CUES.search(before[-30:]):
        return "work"
    if _ORG_CUES.search(before[-25:]):
        return "organization"  # "works at Fabrikam": an employer, not a place
    if _BRAND_AFTER.match(after) or _BRAND_BEFORE.search(before[-25:]):
        return "organization"
    if len(words) > 1 and words[-1].endswith("s") and words[-1] not in _PLACE_WORDS and (
            " ".join(words[:-1]) in _PLACES or " ".join(words[:-1]) in _gazetteer()):
        return "organization"  # a place and a plural: a team ("Minnesota Wolves")
    if key in _gazetteer() and words[0] not in _given_names():
        return "place"  # a city with no cue, or "from Rotterdam" (not a person's "from")
    if _PERSON_CUES.search(before[-20:]):
        return "person"  # "my manager Priya Shah"
    if len(words) <= 3 and words[0] in _given_names() and (len(words) > 1 or _SINGLE_GIVEN):
        return "person"  # "Priya Shah", "Anna Pavlovna"; not "Game of Thrones", "Under Armour"
    if key in _gazetteer():
        return "place"
    if _PLACE_CUES.search(before[-20:]):
        return "place"
    return ""


_ZH_TITLE = re.compile(r"《([^《》]{1,40})》")


def _chinese(text: str) -> list[Span]:
    # A title in 《》 is a work (a book, a film, a song), whatever the tagger makes of its words.
    out = [Span(Found(m.group(1), "work"), m.start(1), m.end(1), "quote") for m in _ZH_TITLE.finditer(text)]
    text = _ZH_TITLE.sub(lambda m: "\u3000" * len(m.group(0)), text)
    at = 0
    for word, flag in _pos_tagged(text):
        start = text.find(word, at)
        start = at if start < 0 else start
        at = start + len(word)
        kind = _ZH_FLAGS.get(flag[:2])
        if kind in ("person", "work") and word in _gazetteer():
            kind = "place"  # a transliterated city tagged nr: 西雅图, 艾尔帕索
        if kind and len(word) >= 2 and _CJK.search(word):
            out.append(Span(Found(word, kind), start, at, flag))
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
