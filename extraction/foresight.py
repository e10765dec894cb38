"""Foresight: what a conversation says about the future (plans, intentions, scheduled events, deadlines),
each with an absolute validity window computed from the message's time.

Deterministic in English and Chinese: a sentence is foresight when it states an intention in the
first person ("I'm going to…", "we're planning…", "我打算…") or names a future time together with
something that will happen then ("I'm adopting a puppy next month", "我下周去上海出差", "the
deadline is Friday"). Questions are not (they ask about someone else's plans), nor are habits ("I walk
the dog every morning", "我每天早上都去公园散步") unless they start at a dated future time. The window starts at
the future time named (else at the message) and ends with that day, week, month or year (else
DEFAULT_HORIZON_DAYS later); a deadline ("by Friday", "截止", "之前") runs from the message to it.

With an LLM configured, `llm_foresight` asks the model for the same items, for a MemCell in which
the deterministic scan saw a future cue (so a chat without one costs no extra call).
"""

import logging
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from extraction.base import Passage
from extraction.dates import ResolvedDate, dated, resolve_relative_dates, resolved_dates
from extraction.prompts import passage_line
from extraction.sentences import split_sentences

log = logging.getLogger(__name__)

# An intention with no time named holds for about a month: long enough for "I'm going to start
# pottery" to be asked about in the next sessions, short enough that it is demoted once stale.
DEFAULT_HORIZON_DAYS = 30
MAX_ITEMS_PER_UNIT = 20  # a runaway reply must not flood the index
MAX_CHARS = 500

# Intentions strong enough on their own ("I'm going to…").
_EN_INTENT = re.compile(
    r"\b(?:i\s*'?m|i am|we\s*'?re|we are)\s+(?:going to|gonna|planning (?:to|on)|about to|hoping to|"
    r"thinking (?:about|of) (?:\w+ing)|planning (?:a|an|my|our|the|some)|looking forward to|aiming to|"
    r"set to|scheduled to|due to)\b"
    r"|\b(?:i|we)\s+(?:plan|intend|am planning|are planning) (?:to|on)\b"
    r"|^(?:gonna|going to|planning (?:to|on)|plan to)\b"
    r"|\b(?:my|our) (?:plan|goal|aim) (?:is|for \w+ is) to\b"
    r"|\b(?:i|we)(?:\s+will|\s*'ll)\s+(?:be (?:going|moving|starting|visiting|travell?ing|flying)|start|move|visit|"
    r"travel|fly|attend|go|take|run|join|apply|begin|get|adopt|buy|finish|launch|host|present)\b",
    re.I,
)
# Weaker cues that count only beside a future time ("I'll call you tomorrow", "I'm flying on Friday").
_EN_WEAK = re.compile(
    r"\b(?:i|we)\s*(?:'ll|will|want to|hope to|have to|need to|must|can't wait to)\b"
    r"|\b(?:i\s*'?m|i am|we\s*'?re|we are)\s+\w+ing\b"
    r"|\b(?:deadline|due|appointment|interview|exam|meeting|wedding|trip|flight|concert|conference|party|"
    r"vacation|holiday|surgery|recital|game|race|marathon|show|festival|event|class|workshop)\b",
    re.I,
)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
# Future times dates.py does not resolve: "in two weeks", "on Friday", "soon", "later this month".
_EN_IN = re.compile(
    r"\bin (?P<n>\d{1,2}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a couple of|a few) "
    r"(?P<unit>day|week|month|year)s?\b", re.I)
_EN_ON_WEEKDAY = re.compile(rf"\b(?:on|this|by|until|before|is|coming) (?P<day>{_WEEKDAY})\b", re.I)
_EN_SOON = re.compile(r"\b(?:soon|upcoming|later this (?P<unit>week|month|year)|"
                      r"(?:at )?the end of (?:the|this) (?P<end>week|month|year))\b", re.I)
_EN_DEADLINE = re.compile(r"\b(?:by|before|until|due|deadline)\b", re.I)
_EN_PAST_ONLY = re.compile(r"\b(?:yesterday|last (?:week|month|year|night)|ago)\b", re.I)

_ZH_INTENT = re.compile(r"(?:打算|计划|准备|将要|即将|决定要|想要去|要去|会去|安排了|预计|约好)")
_ZH_FUTURE = re.compile(r"(?:明天|后天|下周|下星期|下个星期|下个月|下月|明年|这周末|本周末|周末|月底|年底|过几天|"
                        r"不久|下(?:周|星期)[一二三四五六日天])")
_ZH_DEADLINE = re.compile(r"(?:截止|之前|以前|前要|到期|期限)")
_ZH_QUESTION = re.compile(r"[吗呢？?]\s*$")

# A habit ("I walk the dog every morning", "我每天早上都要去公园散步") holds now and keeps holding: it
# is a state of the person (a profile item, a fact), not something ahead with a window. Only a habit
# that starts at a dated future time ("I'll start running every morning next week") is foresight.
_EN_HABIT = re.compile(
    rf"\b(?:every (?:single )?(?:morning|day|night|evening|afternoon|week|weekend|month|year|{_WEEKDAY})|"
    rf"each (?:morning|day|night|evening|week)|daily|nightly|weekly|usually|always|regularly|normally|typically|"
    rf"habitually|most (?:days|mornings|evenings|nights)|on (?:weekends|weekdays|{_WEEKDAY}s)|"
    rf"every other (?:day|week))\b", re.I)
_ZH_HABIT = re.compile(r"(?:每天|每晚|每早|每周|每个?(?:星期|礼拜|月|周末|早上|晚上)|每星期|每逢|经常|总是|通常|平时|"
                       r"一般都|天天|每日|每年|习惯)")


def is_habit(sentence: str) -> bool:
    """Whether a sentence tells what someone does regularly (in either language)."""
    return bool(_ZH_HABIT.search(sentence) or _EN_HABIT.search(sentence))


_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


@dataclass
class ForesightItem:
    text: str  # the sentence, its relative dates made absolute ("next month (June 2023)")
    source_id: str
    speaker: str
    valid_from: datetime
    valid_until: datetime
    cue: str  # what made it future: the time named or the intention's words
    mode: str = "deterministic"


def extract_foresight(passages: list[Passage]) -> list[ForesightItem]:
    """The deterministic foresight of a MemCell's messages, in message order, one per sentence at most."""
    items = []
    for passage in passages:
        when = passage.timestamp
        if when is None or not passage.text:
            continue
        for sentence in split_sentences(passage.text):
            item = foresight_of(sentence.strip(), when)
            if item is not None:
                item.source_id, item.speaker = passage.source_id, passage.speaker
                items.append(item)
    return items[:MAX_ITEMS_PER_UNIT]


def has_future_cue(passages: list[Passage]) -> bool:
    """A cheap test whether a MemCell may hold foresight at all (gates the LLM call)."""
    text = " ".join(p.text for p in passages)
    return bool(_EN_INTENT.search(text) or _ZH_INTENT.search(text) or _ZH_FUTURE.search(text)
                or _future_dates(text, date.today()) or _EN_IN.search(text))


def foresight_of(sentence: str, when: datetime) -> ForesightItem | None:
    """The sentence as foresight with its window, or None when it says nothing about the future."""
    if len(sentence) < 6 or len(sentence) > MAX_CHARS or sentence.rstrip().endswith(("?", "？")):
        return None
    zh = bool(re.search(r"[\u4e00-\u9fff]", sentence))
    if zh and _ZH_QUESTION.search(sentence):
        return None
    day = when.date()
    if is_habit(sentence) and not _future_dates(sentence, day):
        return None
    window = _window(sentence, day, zh)
    intent = (_ZH_INTENT.search(sentence) if zh else None) or _EN_INTENT.search(sentence)
    weak = None if zh else _EN_WEAK.search(sentence)
    if window is None:
        if intent is None or (not zh and _EN_PAST_ONLY.search(sentence)):
            return None
        start, end, cue, target = day, day + timedelta(days=DEFAULT_HORIZON_DAYS), intent.group(0), None
    else:
        start, end, cue, target = window
        if intent is None and weak is None and not zh:
            return None
    text, resolved = resolve_relative_dates(sentence, when)
    if resolved is None and window is not None:
        text = dated(text, target)  # "in two weeks (22 May 2023)": the day named, searchable like the rest
    tz = when.tzinfo
    return ForesightItem(text=text, source_id="", speaker="", valid_from=datetime.combine(start, time.min, tz),
                         valid_until=datetime.combine(end, time.min, tz), cue=cue.strip())


def _window(sentence: str, day: date, zh: bool) -> tuple[date, date, str, date] | None:
    """[start, end) of the first future time the sentence names, its words and the day it names; None
    when it names none. A deadline's window opens at the message."""
    found = _future_dates(sentence, day)
    deadline = bool((_ZH_DEADLINE if zh else _EN_DEADLINE).search(sentence))
    if found:
        words, resolved = found[0]
        start, end = resolved.start, _end_of(resolved)
    else:
        extra = _english_extra(sentence, day) if not zh else _chinese_extra(sentence, day)
        if extra is None:
            return None
        start, end, words = extra
    target = max(start, day)
    if deadline:
        start = day
    return max(start, day), max(end, day + timedelta(days=1)), words, target


def _future_dates(sentence: str, day: date) -> list[tuple[str, ResolvedDate]]:
    """The relative dates of dates.py that point at today or later ("tomorrow", "next month", "下周")."""
    out = []
    for match, resolved in resolved_dates(sentence, day):
        if _end_of(resolved) > day and not re.search(r"ago|前$|以前|之前|last|上|昨|前天|去年|前年",
                                                       match.group(0), re.I):
            out.append((match.group(0), resolved))
    return out


def _english_extra(sentence: str, day: date) -> tuple[date, date, str] | None:
    m = _EN_IN.search(sentence)
    if m:
        n = int(m.group("n")) if m.group("n").isdigit() else _NUMBERS.get(m.group("n").lower(), 1)
        unit = m.group("unit").lower()
        target = day + {"day": timedelta(days=n), "week": timedelta(weeks=n)}.get(unit, timedelta(0))
        if unit == "month":
            target = _add_months(day, n)
        elif unit == "year":
            target = date(day.year + n, day.month, min(day.day, 28))
        return target, target + timedelta(days={"day": 1, "week": 7, "month": 31, "year": 366}[unit]), m.group(0)
    m = _EN_ON_WEEKDAY.search(sentence)
    if m:
        target = day + timedelta(days=(_WEEKDAYS.index(m.group("day").lower()) - day.weekday()) % 7 or 7)
        return target, target + timedelta(days=1), m.group(0)
    m = _EN_SOON.search(sentence)
    if m:
        unit = m.group("unit") or m.group("end")
        if unit:
            end = {"week": day - timedelta(days=day.weekday()) + timedelta(days=7),
                   "month": _add_months(day.replace(day=1), 1), "year": date(day.year + 1, 1, 1)}[unit.lower()]
            return day, end, m.group(0)
        return day, day + timedelta(days=DEFAULT_HORIZON_DAYS), m.group(0)
    return None


def _chinese_extra(sentence: str, day: date) -> tuple[date, date, str] | None:
    m = _ZH_FUTURE.search(sentence)
    if not m:
        return None
    words = m.group(0)
    if words in ("月底",):
        return day, _add_months(day.replace(day=1), 1), words
    if words in ("年底",):
        return day, date(day.year + 1, 1, 1), words
    if "周末" in words:
        saturday = day + timedelta(days=(5 - day.weekday()) % 7)
        return saturday, saturday + timedelta(days=2), words
    if words.startswith("下") and words[-1] in "一二三四五六日天":
        monday = day - timedelta(days=day.weekday()) + timedelta(weeks=1)
        target = monday + timedelta(days="一二三四五六日天".index(words[-1]) if words[-1] != "天" else 6)
        return target, target + timedelta(days=1), words
    return day, day + timedelta(days=DEFAULT_HORIZON_DAYS if words in ("不久", "过几天") else 7), words


def _end_of(resolved: ResolvedDate) -> date:
    start = resolved.start
    if resolved.unit == "day":
        return start + timedelta(days=1)
    if resolved.unit == "weekend":
        return start + timedelta(days=2)
    if resolved.unit == "week":
        return start + timedelta(days=7)
    if resolved.unit == "month":
        return _add_months(start, 1)
    return date(start.year + 1, 1, 1)


def _add_months(day: date, n: int) -> date:
    index = day.year * 12 + day.month - 1 + n
    return date(index // 12, index % 12 + 1, min(day.day, 28))


# --- LLM mode

FORESIGHT_PROMPT = """\
You read a stretch of conversation and list what it says about the future: plans, intentions,
scheduled events and deadlines of the speakers. Passages are numbered and carry a timestamp and the
speaker's name. Reply with one JSON object and nothing else:
{"foresight": [{"text": str, "source": int, "valid_from": "YYYY-MM-DD", "valid_until": "YYYY-MM-DD"}]}
text: one self-contained statement in the third person naming the speaker, with absolute dates
  ("Caroline plans to adopt a puppy in June 2023"), in the language of the passages.
source: the number of the passage it comes from.
valid_from / valid_until: the window in which it holds, computed from the passage's timestamp
  (a plan for "next month" holds for that month; a deadline from the message to the deadline).
List nothing that already happened, and nothing asked as a question. An empty list is a valid answer.
"""


def check_foresight_reply(obj: dict) -> None:
    items = obj.get("foresight")
    if not isinstance(items, list):
        raise ValueError('"foresight" must be a list')
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or not item["text"].strip():
            raise ValueError(f'foresight[{i}] must be an object with a non-empty string "text"')
        for key in ("valid_from", "valid_until"):
            if not isinstance(item.get(key), str) or not re.match(r"^\d{4}-\d{2}-\d{2}", item[key]):
                raise ValueError(f'foresight[{i}].{key} must be "YYYY-MM-DD"')


def foresight_schema(count: int) -> dict:
    """What check_foresight_reply accepts, as a JSON Schema (common/llm_formats.py)."""
    day = {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
    item = {"type": "object", "additionalProperties": False, "required": ["text", "source", "valid_from", "valid_until"],
            "properties": {"text": {"type": "string"},
                           "source": {"enum": list(range(1, count + 1))}, "valid_from": day, "valid_until": day}}
    return {"type": "object", "additionalProperties": False, "required": ["foresight"],
            "properties": {"foresight": {"type": "array", "maxItems": MAX_ITEMS_PER_UNIT, "items": item}}}


def llm_foresight(passages: list[Passage]) -> list[ForesightItem] | None:
    """The model's foresight for a MemCell; None when the model failed (the caller keeps the rules' items)."""
    from common.llm import LlmError, complete_json  # noqa: PLC0415 - keeps the openai import off the default path

    usable = [p for p in passages if p.text and p.text.strip() and p.timestamp]
    if not usable:
        return []
    messages = [{"role": "system", "content": FORESIGHT_PROMPT},
                {"role": "user", "content": "\n".join(passage_line(i, p) for i, p in enumerate(usable, start=1))}]
    try:
        reply = complete_json(messages, schema_check=check_foresight_reply, step="foresight",
                              schema=foresight_schema(len(usable)))
    except LlmError as exc:
        log.warning("LLM foresight failed, keeping the deterministic items of this MemCell: %s", exc)
        return None
    items = []
    for raw in reply["foresight"][:MAX_ITEMS_PER_UNIT]:
        number = raw.get("source")
        passage = usable[number - 1] if isinstance(number, int) and 1 <= number <= len(usable) else usable[0]
        tz = passage.timestamp.tzinfo
        try:
            start = datetime.combine(date.fromisoformat(raw["valid_from"][:10]), time.min, tz)
            end = datetime.combine(date.fromisoformat(raw["valid_until"][:10]), time.min, tz) + timedelta(days=1)
        except ValueError:
            continue
        if end <= start:
            end = start + timedelta(days=1)
        items.append(ForesightItem(" ".join(raw["text"].split())[:MAX_CHARS], passage.source_id, passage.speaker,
                                   start, end, "llm", mode="llm"))
    return items
