"""Relative date expressions ("yesterday", "last week", "去年") made absolute against a reference date.

The original words stay in the text and the absolute date follows in brackets, so quoting stays
faithful and the date becomes searchable: "went yesterday" → "went yesterday (7 May 2023)" (the
way English questions name dates: "on 7 May", "in May 2023"), "昨天" → "昨天（2023-05-07）".
"""

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta


@dataclass
class ResolvedDate:
    """Where a relative expression points: the start of the day, week, month or year it names."""

    start: date
    label: str  # ISO, for Chinese text: "2023-05-07", "week of 2023-05-01", "2023-04", "2022"
    unit: str = "day"  # day, week, weekend, month or year

    @property
    def words(self) -> str:
        """The date as English text writes it: "7 May 2023", "week of 1 May 2023", "April 2023", "2022"."""
        day = english_day(self.start)
        return {"day": day, "week": f"week of {day}", "weekend": f"weekend of {day}",
                "month": f"{self.start:%B %Y}"}.get(self.unit, str(self.start.year))


_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
}
_ZH_NUMBERS = {
    "一": 1,
    "两": 2,
    "二": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
    "十": 10,
    "几": 3,
}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

_EN = re.compile(
    r"\b(?:(?P<daybefore>the day before yesterday)|(?P<dayafter>the day after tomorrow)"
    r"|(?P<today>today|tonight|this (?:morning|afternoon|evening))|(?P<yesterday>yesterday|last night)"
    r"|(?P<tomorrow>tomorrow)"
    r"|(?P<rel>last|this|next) (?P<unit>week(?:end)?|month|year|(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
    r"|(?P<n>\d{1,2}|a couple of|couple of|a few|few|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
    r" (?P<agounit>day|week|month|year)s? ago)\b",
    re.I,
)
_ZH = re.compile(
    r"(?P<daybefore>前天)|(?P<dayafter>(?<![先之])后天)|(?P<today>今天|今日|今晚|今早|今天早上)"
    r"|(?P<yesterday>昨天|昨日|昨晚)|(?P<tomorrow>明天|明日|明早|明晚)"
    r"|(?P<lastweek>上周|上星期|上个星期|上个礼拜)|(?P<thisweek>本周|这周|这个星期)|(?P<nextweek>下周|下星期|下个星期)"
    r"|(?P<lastmonth>上个月|上月)|(?P<thismonth>这个月|本月)|(?P<nextmonth>下个月|下月)"
    r"|(?P<yearbefore>前年)|(?P<lastyear>去年)|(?P<thisyear>今年)|(?P<nextyear>明年)"
    r"|(?P<n>\d{1,2}|[一两二三四五六七八九十几])(?:个)?(?P<agounit>天|周|星期|月|年)(?:前|以前|之前)"
)


def resolve_relative_dates(text: str, reference: date | datetime | None) -> tuple[str, ResolvedDate | None]:
    """The text with absolute dates added after each relative expression, and the first date found."""
    if reference is None:
        return text, None
    ref = reference.date() if isinstance(reference, datetime) else reference
    first: list[ResolvedDate] = []
    zh = bool(re.search(r"[\u4e00-\u9fff]", text))

    def replace(match: re.Match) -> str:
        resolved = _resolve(match, ref)
        if resolved is None:
            return match.group(0)
        if not first:
            first.append(resolved)
        if zh:
            label = re.sub(r"^week of (.*)$", r"\1当周", re.sub(r"^weekend of (.*)$", r"\1周末", resolved.label))
            return f"{match.group(0)}（{label}）"
        return f"{match.group(0)} ({resolved.words})"

    text = _EN.sub(replace, text)
    if zh:
        text = _ZH.sub(replace, text)
    return text, (first[0] if first else None)


def resolved_dates(text: str, reference: date | datetime) -> list[tuple[re.Match, ResolvedDate]]:
    """Every relative expression of the text with where it points, in order (foresight windows)."""
    ref = reference.date() if isinstance(reference, datetime) else reference
    found = [(m, _resolve(m, ref)) for m in _EN.finditer(text)]
    if re.search(r"[\u4e00-\u9fff]", text):
        found += [(m, _resolve(m, ref)) for m in _ZH.finditer(text)]
    return sorted(((m, r) for m, r in found if r is not None), key=lambda pair: pair[0].start())


# A date this module wrote: "(7 May 2023)", "(week of 1 May 2023)", "(June 2023)", "(2022)", "（2023-05-07）".
_WRITTEN = re.compile(r"\((?:(?:week|weekend) of )?(?:\d{1,2} )?(?:[A-Z][a-z]+ )?\d{4}\)|（[^（）]*\d{4}[^（）]*）")
# The day `dated` adds at the end of a statement, which `undated` takes off.
_STAMP = re.compile(r" \(\d{1,2} [A-Z][a-z]+ \d{4}\)$|（\d{4}-\d{2}-\d{2}）$")


def english_day(day: date) -> str:
    """A day as English text writes it, and as questions name it: "7 May 2023" (never ISO)."""
    return f"{day.day} {day:%B %Y}"


def dated(text: str, when: date | datetime | None) -> str:
    """A statement with the day it was made ("… (8 May 2023)"), unless a date it names is already resolved.

    A chat fact read on its own has lost its message's time: "Melanie is swamped with work" is
    true of one day, and questions ask "what did Melanie do in May 2023?".
    """
    if when is None or _WRITTEN.search(text):
        return text
    day = when.date() if isinstance(when, datetime) else when
    if re.search(r"[\u4e00-\u9fff]", text):
        return f"{text}（{day.isoformat()}）"
    return f"{text} ({english_day(day)})"


def undated(text: str) -> str:
    """The statement without the day `dated` added to it."""
    return _STAMP.sub("", text)


def _resolve(m: re.Match, ref: date) -> ResolvedDate | None:
    """Where the expression points from `ref`; None when it does not say, or points outside the
    calendar (year 1 to 9999: "100000000 days ago", or "next year" from 9999)."""
    try:
        return _resolve_in_calendar(m, ref)
    except (OverflowError, ValueError):
        return None


def _resolve_in_calendar(m: re.Match, ref: date) -> ResolvedDate | None:
    groups = {k: v for k, v in m.groupdict().items() if v}
    offsets = {"daybefore": -2, "dayafter": 2, "today": 0, "yesterday": -1, "tomorrow": 1}
    for name, days in offsets.items():
        if name in groups:
            return _day(ref + timedelta(days=days))
    for name, weeks in {"lastweek": -1, "thisweek": 0, "nextweek": 1}.items():
        if name in groups:
            return _week(ref, weeks)
    for name, months in {"lastmonth": -1, "thismonth": 0, "nextmonth": 1}.items():
        if name in groups:
            return _month(ref, months)
    for name, years in {"yearbefore": -2, "lastyear": -1, "thisyear": 0, "nextyear": 1}.items():
        if name in groups:
            return ResolvedDate(date(ref.year + years, 1, 1), str(ref.year + years), "year")
    if "rel" in groups:
        return _relative(groups["rel"].lower(), groups["unit"].lower(), ref)
    if "agounit" in groups:
        return _ago(groups["n"], groups["agounit"].lower(), ref)
    return None


def _relative(rel: str, unit: str, ref: date) -> ResolvedDate | None:
    step = {"last": -1, "this": 0, "next": 1}[rel]
    if unit == "week":
        return _week(ref, step)
    if unit == "weekend":
        # The Saturday of the previous, current or next week.
        saturday = ref - timedelta(days=ref.weekday()) + timedelta(days=5 + 7 * step)
        if step == -1 and ref.weekday() == 6:
            saturday += timedelta(days=7)  # on a Sunday, "last weekend" is the one just ending
        return ResolvedDate(saturday, f"weekend of {saturday.isoformat()}", "weekend")
    if unit == "month":
        return _month(ref, step)
    if unit == "year":
        return ResolvedDate(date(ref.year + step, 1, 1), str(ref.year + step), "year")
    target = _WEEKDAYS.index(unit)
    if step == -1:  # "last Friday": the most recent Friday before the reference day
        delta = (ref.weekday() - target) % 7 or 7
        return _day(ref - timedelta(days=delta))
    if step == 1:  # "next Friday": the first Friday after the reference day
        delta = (target - ref.weekday()) % 7 or 7
        return _day(ref + timedelta(days=delta))
    return _day(ref - timedelta(days=ref.weekday()) + timedelta(days=target))


def _ago(n: str, unit: str, ref: date) -> ResolvedDate | None:
    count = int(n) if n.isdigit() else _NUMBER_WORDS.get(n.lower(), _ZH_NUMBERS.get(n))
    if not count:
        return None
    if unit in ("day", "天"):
        return _day(ref - timedelta(days=count))
    if unit in ("week", "周", "星期"):
        return _day(ref - timedelta(weeks=count))
    if unit in ("month", "月"):
        return _month(ref, -count)
    return ResolvedDate(date(ref.year - count, 1, 1), str(ref.year - count), "year")


def _day(d: date) -> ResolvedDate:
    return ResolvedDate(d, d.isoformat())


def _week(ref: date, step: int) -> ResolvedDate:
    monday = ref - timedelta(days=ref.weekday()) + timedelta(weeks=step)
    return ResolvedDate(monday, f"week of {monday.isoformat()}", "week")


def _month(ref: date, step: int) -> ResolvedDate:
    index = ref.year * 12 + ref.month - 1 + step
    first = date(index // 12, index % 12 + 1, 1)
    return ResolvedDate(first, first.strftime("%Y-%m"), "month")
