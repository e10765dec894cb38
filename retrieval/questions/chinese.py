"""Questions a Chinese statement answers, from its own structure (no model): the answerable part is
replaced by its question word, which Chinese puts where the answer stood — a date by 什么时候
("2017年3月5日品牌撤出台湾" → "什么时候品牌撤出台湾？"), a count by 多少 ("公司有300名员工" →
"公司有多少名员工？"), a place by 哪里 ("X在Y工作" → "X在哪里工作？", "谁在Y工作？"), a definition
("X是Y" → "X是什么？", and "谁是Y？" when Y names a person's role)."""

import re

_DIGITS = r"(?:\d+|[〇零一二三四五六七八九十百千两]+)"
DATE_RE = re.compile(rf"(?:于|在|从|自)?(?:(?:公元前?)?{_DIGITS}年(?:{_DIGITS}月)?(?:{_DIGITS}[日号])?"
                     rf"|{_DIGITS}月{_DIGITS}[日号]|{_DIGITS}(?:世纪|年代))")
MEASURES = ("平方公里|公里|公斤|万人|亿元|万元|美元|个|名|位|家|人|种|次|件|本|座|所|条|项|间|台|辆|只|元|岁|天|米|张"
            "|部|首|层|届|场|支|份|块|门|篇|册|卷|集|章|节|户|吨|倍|周|小时|分钟")
COUNT_RE = re.compile(rf"(?:约|大约|超过|近|共|逾)?(\d[\d,.]*|[一二三四五六七八九十百千万两]+)(?:多|余)?(万|亿)?({MEASURES})")
PLACE_VERBS = "工作|学习|生活|居住|任职|任教|上学|读书|就读|出生|长大|举行|举办|成立|创立|开设|开业|定居|去世|逝世|留学|演出|比赛"
PLACE_RE = re.compile(rf"^(.{{1,14}}?)(在|于|到|去)([^，,。在于]{{1,16}}?)({PLACE_VERBS})(.*)$")
IS_RE = re.compile(r"^([^，,。是]{1,16}?)(?:是|为)([^，,。]{2,40})$")
# A role noun ends what "X是Y" says about a person: then the question is "谁是Y？".
PERSON_ROLE = re.compile(r"(人|者|家|长|师|员|手|主|父|母|子|女|妻|夫|帝|王|官|生|星|友)$")


def questions(sentence: str) -> list[str]:
    """The questions one Chinese sentence answers, best first (none when no pattern fits)."""
    sentence = sentence.strip().rstrip("。！；;!.：:")
    if len(sentence) < 4 or sentence.endswith(("？", "?")):
        return []
    out = []
    date = DATE_RE.search(sentence)
    if date:
        word = "哪一年" if date.group(0).endswith("年") else "什么时候"
        out.append(f"{sentence[:date.start()]}{word}{sentence[date.end():]}")
    count = COUNT_RE.search(sentence)
    if count and not (date and count.start() < date.end() and date.start() < count.end()):
        unit = (count.group(2) or "") + count.group(3)
        out.append(f"{sentence[:count.start()]}多少{unit}{sentence[count.end():]}")
    place = PLACE_RE.match(sentence)
    if place and not DATE_RE.search(place.group(3)):
        who, prep, where, verb, rest = place.groups()
        out.append(f"{who}{prep}哪里{verb}{rest}")
        out.append(f"谁{prep}{where}{verb}{rest}")
    defined = IS_RE.match(sentence)
    if defined and not out:
        subject, what = defined.groups()
        out += [f"谁是{what}"] if PERSON_ROLE.search(what) else [f"{subject}是什么", f"{what}是什么"]
    return [re.sub(r"^(什么时候|哪一年)[，,]", r"\1", q).strip(" ，,") + "？" for q in out]
