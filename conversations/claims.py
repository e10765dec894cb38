"""The (attribute, subject, value) a fact states, and whether a newer one makes an older one out of date.

Pure functions, no database: consolidation.py asks `claim()` of a new fact and of the user's older
facts and supersedes an older one when `contradicts(new, old)`. Facts reach here in the third
person, as coreference.py writes them ("Alex now works at Fabrikam", "Alex现在在Fabrikam工作").

- Single-valued attributes (where someone lives, works, their job, partner, a favourite, when they
  wake up): another value is an update ("moved to Seattle" replaces "lives in Boston").
- Many-valued ones (pets, likes, trips planned): a second value adds, it does not replace; only a
  negation of the same value ("no longer likes coffee", "Mochi passed away", "不去东京了") or a
  value said to be instead of the other ("to Kyoto instead", "改去京都") supersedes.
- What someone used to do ("used to live in", "以前住在") is a statement about the past: it
  neither supersedes nor is superseded.
Both languages, since a user may state a fact in one and update it in the other: the attribute
names are shared, so "我现在在Fabrikam工作" supersedes "Alex works at Contoso".
"""

import re
from dataclasses import dataclass
from functools import lru_cache

from conversations.statements import SINGLE_VALUED as SINGLE_VALUED_SLOTS, read
from extraction.dates import undated

MAX_SUBJECT_WORDS = 4  # a longer "subject" is a clause the pattern ran over, not a person
SINGLE_VALUED = ("lives_in", "works_at", "works_as", "partner", "favourite", "wakes_up")

# Words between the subject and its verb that do not change what is claimed ("Alex now works at…").
_EN_ADVERBS = re.compile(
    r"\b(?:now|currently|still|recently|just|finally|already|officially|actually|also|really|newly|happily|"
    r"presently|right now|these days|at the moment|as of now)\s+", re.I)
_EN_PAST = re.compile(r"\b(?:used to|previously|formerly|back then|in the past|at the time|once upon)\b", re.I)
_ZH_PAST = re.compile(r"(?:以前|曾经|过去|之前|那时|当年|小时候)")
_ZH_ADV = r"(?:现在|目前|如今|已经|刚刚|刚|最近|终于|也|还|又|正在|都|就|从此|今年|这个月)*"

_S = r"(?P<s>[^,.;:!?，。]{1,80}?)"
_O = r"(?P<o>[^;!?。；]+?)[.!]*$"
_ZS = r"(?P<s>[^，。\s]{1,20}?)"
_ZO = r"(?P<o>[^，。！？；,.!?;\s]{1,20}?)"
_ZEND = r"(?:了|啦|呢|吧)?(?:[，。！？；,.!?;]|$)"
_PETS = r"dog|puppy|cat|kitten|bird|parrot|hamster|rabbit|bunny|fish|turtle|horse|guinea pig"
_ZH_PETS = r"小狗|狗狗|狗|小猫|猫咪|猫|兔子|鹦鹉|仓鼠|金鱼|乌龟"
_POS = r"(?:a |an |the |one |another |their |his |her |its |[A-Z]\w*['’]s )?"

# (attribute, negated, pattern); the first match wins, so a negation is listed before its positive.
_EN = [
    ("works_at", True, rf"^{_S} (?:no longer works|does(?:n't| not) work|is(?:n't| not) working|quit|left|"
                       rf"stopped working) (?:{_POS}(?:job|position|role) )?(?:at|for|with) {_O}"),
    ("works_at", True, rf"^{_S} quit (?P<o>[A-Z][\w&.-]*(?: [A-Z][\w&.-]*){{0,3}})$"),
    ("works_at", False, rf"^{_S} (?:works|is working|has been working|has worked|started working|began working|"
                        rf"has started working|is employed|got employed|is interning|is an intern) (?:at|for|by) {_O}"),
    ("works_at", False, rf"^{_S} (?:got|landed|accepted|started|took|has|began|found|was offered|is starting|"
                        rf"has started|has accepted|has landed) {_POS}(?:new |full-time |part-time |dream )?"
                        rf"(?:job|position|role|internship|gig) (?:at|with) {_O}"),
    ("works_at", False, rf"^{_S} (?:switched|moved|changed) (?:jobs|companies|employers) to {_O}"),
    ("works_as", False, rf"^{_S} (?:works|is working) as (?:an? )?{_O}"),
    ("works_as", False, rf"^{_S} (?:started|got|took|landed|accepted|began|has started|is starting) {_POS}(?:new )?"
                        rf"(?:job|position|role|career) as (?:an? |the )?{_O}"),
    ("works_as", False, rf"^{_S} (?:became|has become|got promoted to|was promoted to|is now) (?:an? |the )?"
                        rf"(?P<o>[\w -]{{2,40}}?(?:manager|engineer|developer|designer|teacher|nurse|director|"
                        rf"lead|analyst|consultant|chef|lawyer|doctor|officer|editor|scientist|researcher))\b"),
    ("lives_in", True, rf"^{_S} (?:no longer lives|does(?:n't| not) live|is(?:n't| not) living|moved out of|"
                       rf"moved away from|left) (?:in )?(?P<o>(?:the )?[A-Z][\w-]*(?:,? [A-Z][\w-]*){{0,2}})"),
    ("lives_in", False, rf"^{_S} (?:lives|is living|has been living|resides|is based|has moved|moved|relocated|"
                        rf"has relocated|is moving|will move|settled|has settled) (?:back )?(?:in|to) {_O}"),
    ("partner", True, rf"^{_S} (?:broke up with|split up with|divorced|separated from|is no longer (?:dating|with|"
                      rf"married to|engaged to|seeing)|(?:is|was) dumped by|ended things with) {_O}"),
    ("partner", False, rf"^{_S} (?:is (?:married to|engaged to|dating|seeing|in a relationship with|going out with)|"
                       rf"got (?:married|engaged) to|married|started dating|has been dating) {_O}"),
    ("partner", False, rf"^{_S} has {_POS}(?:new )?(?:boyfriend|girlfriend|partner|husband|wife|fianc[eé]e?)"
                       rf",? (?:named |called )?(?P<o>[A-Z]\w+)"),
    ("favourite", False, rf"^{_S}['’]s (?:new |current |all-time )?favou?rite(?: one)? is {_O}"),
    ("favourite", False, rf"^{_S}['’]s (?:new |current |all-time )?favou?rite (?P<k>[\w -]{{1,40}}?) (?:is|are) {_O}"),
    ("favourite", False, rf"^{_S}['’]s (?:new |current |all-time )?favou?rite (?P<k>[\w -]{{1,40}}?),? "
                         rf"(?P<o>[A-Z][\w'’&.-]*(?: [A-Z][\w'’&.-]*){{0,4}})"),
    # Obsessed with a named thing is the favourite of its kind ("obsessed with Kansas City Masterpiece BBQ
    # sauce"; LongMemEval 44_18bc8abd's update of "their favorite BBQ sauce, Sweet Baby Ray's").
    ("favourite", False, rf"^{_S} (?:is|has been|got) (?:totally |really |so )?(?:obsessed with|hooked on|crazy about) "
                         rf"(?P<o>[A-Z][\w'’&.-]*(?: [A-Z][\w'’&.-]*){{0,4}}(?: [a-z][\w-]*){{0,2}})"),
    ("wakes_up", False, rf"^{_S} (?:wakes up|likes to wake up|has been waking up|is waking up|gets up|"
                        rf"usually wakes up|tends to wake up|wake up) (?:at |around |by )+"
                        rf"(?P<o>\d{{1,2}}(?::\d{{2}})?\s*(?:am|pm|a\.m\.|p\.m\.)?)"),
    ("pet", True, rf"^{_S}['’]s (?:\w+ )?(?P<k>{_PETS}),? (?P<o>[A-Z]\w+),? (?:died|passed away|was put down|"
                  rf"ran away|was rehomed|is gone)"),
    ("pet", True, rf"^{_S} (?:no longer has|gave away|rehomed|lost) {_POS}(?P<k>{_PETS}),? (?:named |called )?"
                  rf"(?P<o>[A-Z]\w+)"),
    ("pet", False, rf"^{_S} (?:has|got|adopted|owns|has adopted|has got|rescued|brought home) {_POS}(?:new |pet |"
                   rf"little )?(?P<k>{_PETS}),? (?:named|called) (?P<o>[A-Z]\w+)"),
    ("pet", False, rf"^{_S}['’]s (?:new |little )?(?P<k>{_PETS})(?:['’]s name)? is (?:named |called )?"
                   rf"(?P<o>[A-Z]\w+)"),
    ("likes", True, rf"^{_S} (?:no longer (?:likes|loves|enjoys)|does(?:n't| not) (?:like|love|enjoy)|dislikes|hates|"
                    rf"is (?:no longer|not) (?:into|a fan of)|stopped (?:liking|enjoying)|(?:is|got|grew) tired of|"
                    rf"went off|can't stand) {_O}"),
    ("likes", False, rf"^{_S} (?:likes|loves|enjoys|adores|prefers|is (?:into|obsessed with|a (?:big |huge )?fan of|"
                     rf"hooked on|crazy about)) {_O}"),
    ("plan", True, rf"^{_S} (?:cancell?ed|called off|gave up on|dropped) {_POS}(?:\w+ )?(?:trip|visit|vacation|"
                   rf"holiday) to {_O}"),
    ("plan", True, rf"^{_S} (?:is no longer|is not|isn't|won't be|will not be) (?:going|travell?ing|flying|heading) "
                   rf"to {_O}"),
    ("plan", False, rf"^{_S} (?:is planning|plans|has planned|booked|is taking|will take|is going on) {_POS}"
                    rf"(?:\w+ )?(?:trip|visit|vacation|holiday) to {_O}"),
    ("plan", False, rf"^{_S} (?:is going|will go|will travel|is travell?ing|is flying|will fly|is heading|plans to go|"
                    rf"is planning to go|is planning to travel|plans to travel|is visiting|will visit) (?:back )?"
                    rf"(?:to )?(?P<o>[A-Z][\w-]*(?: [A-Z][\w-]*){{0,2}})"),
]
_ZH = [
    ("works_at", True, rf"^{_ZS}{_ZH_ADV}(?:不再在|不在)(?P<o>[^，。]{{1,20}}?)(?:工作|上班|任职)"),
    ("works_at", True, rf"^{_ZS}{_ZH_ADV}从(?P<o>[^，。]{{1,20}}?)(?:离职|辞职)"),
    ("works_at", False, rf"^{_ZS}{_ZH_ADV}(?:换到了?|跳槽到了?|跳槽去了?|入职了?|加入了?)(?P<o>[^，。]{{1,20}}?)"
                        rf"(?:工作|上班|公司)?{_ZEND}"),
    ("works_at", False, rf"^{_ZS}{_ZH_ADV}在(?P<o>[^，。]{{1,20}}?)(?:工作|上班|任职)"),
    ("works_as", False, rf"^{_ZS}{_ZH_ADV}(?:是|当上了?|成为了?)(?:一名|一个|一位)(?P<o>[^，。]{{2,10}}?){_ZEND}"),
    ("lives_in", True, rf"^{_ZS}{_ZH_ADV}(?:不再住在|不住在)(?P<o>[^，。]{{1,12}}?){_ZEND}"),
    ("lives_in", True, rf"^{_ZS}{_ZH_ADV}从(?P<o>[^，。]{{1,12}}?)搬走"),
    ("lives_in", False, rf"^{_ZS}{_ZH_ADV}(?:住在|生活在|定居在?|搬到了?|搬去了?|搬家到了?|搬回了?)(?P<o>[^，。]{{1,12}}?)"
                        rf"(?:住|生活|定居)?{_ZEND}"),
    ("partner", True, rf"^{_ZS}{_ZH_ADV}(?:和|跟|与)(?P<o>[^，。]{{1,10}}?)(?:分手|离婚|分开)"),
    ("partner", False, rf"^{_ZS}{_ZH_ADV}(?:和|跟|与)(?P<o>[^，。]{{1,10}}?)(?:结婚|订婚|在一起|交往|谈恋爱)"),
    ("favourite", False, rf"^{_ZS}{_ZH_ADV}最喜欢的(?P<k>[^，。]{{1,10}}?)是(?P<o>[^，。]{{1,20}}?){_ZEND}"),
    ("wakes_up", False, rf"^{_ZS}{_ZH_ADV}(?:每天|周末|周六|周日|平时)?(?:早上)?(?P<o>\d{{1,2}}(?:[:：点]\d{{0,2}}分?|点半?))起床"),
    ("pet", True, rf"^{_ZS}的(?P<k>{_ZH_PETS})(?P<o>[^，。]{{1,10}}?)(?:去世|走了|死了|丢了|送人了)"),
    ("pet", False, rf"^{_ZS}{_ZH_ADV}(?:养了|有|领养了)(?:一只|一条|只)?(?P<k>{_ZH_PETS})，?(?:名字)?叫(?P<o>[^，。\s]{{1,10}}?)"
                   rf"{_ZEND}"),
    ("pet", False, rf"^{_ZS}的(?P<k>{_ZH_PETS})叫(?P<o>[^，。\s]{{1,10}}?){_ZEND}"),
    ("likes", True, rf"^{_ZS}{_ZH_ADV}(?:不再喜欢|不喜欢|讨厌|受不了)(?P<o>[^，。]{{1,20}}?){_ZEND}"),
    ("likes", False, rf"^{_ZS}{_ZH_ADV}(?:很|非常|特别|更|越来越)?(?:喜欢|热爱|爱上了?|迷上了?)(?P<o>[^，。]{{1,20}}?){_ZEND}"),
    ("plan", True, rf"^{_ZS}{_ZH_ADV}(?:不去(?P<o>[^，。]{{1,12}}?)了|取消了?去(?P<o2>[^，。]{{1,12}}?)的)"),
    ("plan", False, rf"^{_ZS}{_ZH_ADV}(?:改去|改成去)(?P<o>[^，。]{{1,12}}?)(?:旅行|旅游|玩|出差)?{_ZEND}"),
    ("plan", False, rf"^{_ZS}{_ZH_ADV}(?:下周|下个月|下月|明年|周末|这周末|月底)?(?:打算|计划|准备|要|将)去"
                    rf"(?P<o>[^，。]{{1,12}}?)(?:旅行|旅游|玩|出差|度假)?{_ZEND}"),
]
# Case-sensitive: names are capitalised ("quit Fabrikam" is a job, "quit smoking" is not), verbs are not.
_EN_RULES = [(a, n, re.compile(p)) for a, n, p in _EN]
_ZH_RULES = [(a, n, re.compile(p)) for a, n, p in _ZH]
_EN_PET_WORDS = {"puppy": "dog", "kitten": "cat", "bunny": "rabbit"}
_ZH_PET_WORDS = {"小狗": "dog", "狗狗": "dog", "狗": "dog", "小猫": "cat", "猫咪": "cat", "猫": "cat", "兔子": "rabbit",
                 "鹦鹉": "parrot", "仓鼠": "hamster", "金鱼": "fish", "乌龟": "turtle"}

# Trailing words that do not change the value: "Boston now", "Boston these days", "Kyoto instead".
_VALUE_TAIL = re.compile(r"(?:,|\s*\(|\s+(?:and|with|since|for|because|but|where|which|as|last|this|next|yesterday|"
                         r"today|ago|on|in|after|from|starting|until|so|to)\b).*$"
                         r"|\s+(?:now|currently|these days|anymore|any more|instead|full-time|again)$", re.I)
_ZH_VALUE_TAIL = re.compile(r"(?:了|啦|呢|的|工作|上班|公司|住|旅行|旅游|玩)+$")
_INSTEAD = re.compile(r"\binstead\b|改去|改成", re.I)
_QUOTES = re.compile(r"[\"“”]")
# Where a statement may start: the beginning, or after an interjection closed by ":", "!" or ",".
_LEAD_IN = re.compile(r"^|[:：!！]\s*|^[A-Za-z ]{2,20},\s*")
_ZH_LEAD = re.compile(r"^(?:其实|不过|但是|另外|而且|所以|因为|嗯|哦|对了|然后|好的)[，,]?")
_JOINT = re.compile(r"(?:,\s*(?:and|but|so|while)|;|\s+and)\s+(?=[A-Z]\w*\s|[a-z]+\s+(?:is|has|was|now|currently)\b)")
# "their favorite BBQ sauce" in a fact about Alex is Alex's (the first-person rewrite writes "their").
_OWN_FAVOURITE = re.compile(r"\b(?:their|his|her) (?=(?:new |current |all-time )?favou?rite\b)")
_LEAD_ADVERB = re.compile(r"^(?:currently|now|these days|nowadays|today|recently|lately|as of now),?\s+", re.I)


@dataclass(frozen=True)
class Claim:
    attribute: str  # "works_at", "favourite:bbq sauce", "pet:dog"
    subject: str  # lower case
    value: str  # lower case
    negated: bool = False  # "no longer works at X": X is the value that stopped holding
    instead: bool = False  # "to Kyoto instead": replaces another value of a many-valued attribute


@lru_cache(maxsize=8192)  # consolidation reads a user's older facts once per superseding statement
def claim(text: str) -> Claim | None:
    """The claim a fact states, or None (no pattern, a question, or a statement about the past).

    Read from the start, then from after each lead-in ("Big news: Alex now works at…", "Guess what,
    …"); the day stamp extraction appends ("(17 June 2023)") is left out."""
    text = _QUOTES.sub("", undated(text.strip())).strip()
    if not text or text.rstrip().endswith(("?", "？")):
        return None
    for lead_in in _LEAD_IN.finditer(text):
        found = _claim(text[lead_in.end():].strip())
        if found is not None:
            return found
    # A claim in the second half of a long sentence ("…for quick dinners, and Alex is currently obsessed
    # with …"): the halves are read in turn when the first claims nothing.
    for joint in _JOINT.finditer(text):
        found = _claim(text[joint.end():].strip())
        if found is not None:
            return found
    return None


def _claim(text: str) -> Claim | None:
    if not text:
        return None
    if re.search(r"[\u4e00-\u9fff]", text):
        if _ZH_PAST.search(text):
            return None
        return _first(_ZH_LEAD.sub("", text), _ZH_RULES, zh=True)
    if _EN_PAST.search(text):
        return None
    text = _LEAD_ADVERB.sub("", text)
    text = text[:1].upper() + text[1:]
    first = re.match(r"[A-Z]\w*", text)
    if first:
        text = _OWN_FAVOURITE.sub(f"{first.group(0)}'s ", text)
    # "Alex now works…" / "Alex is currently working…": the adverbs between subject and verb go.
    return _first(_EN_ADVERBS.sub("", text), _EN_RULES, zh=False)


def contradicts(new: Claim | None, old: Claim | None) -> bool:
    """Whether the newer claim makes the older one out of date (see the module docstring)."""
    if new is None or old is None or new.subject != old.subject:
        return False
    new, old = _kind_from_value(new, old), _kind_from_value(old, new)
    if new.attribute != old.attribute:
        return False
    same = new.value in old.value or old.value in new.value
    if new.negated:
        return same and not old.negated
    if old.negated:
        return same  # back at the same place ("works at Contoso again"): the "no longer" is out of date
    if new.attribute.split(":")[0] in SINGLE_VALUED or new.instead:
        return not same
    return False


def _kind_from_value(one: Claim, other: Claim) -> Claim:
    """"Alex's favourite is Kansas City Masterpiece BBQ sauce" names its kind in the value: read against
    "Alex's favourite BBQ sauce is Sweet Baby Ray's" (LongMemEval 44_18bc8abd) it is the same favourite."""
    if one.attribute != "favourite" or not other.attribute.startswith("favourite:"):
        return one
    kind = other.attribute.split(":", 1)[1]
    if not one.value.endswith(kind) or one.value == kind:
        return one
    return Claim(other.attribute, one.subject, one.value[: -len(kind)].strip(), one.negated, one.instead)


def _first(text: str, rules, *, zh: bool) -> Claim | None:
    for attribute, negated, pattern in rules:
        m = pattern.match(text)
        if not m:
            continue
        groups = m.groupdict()
        raw = groups.get("o") or groups.get("o2") or ""
        value = (_ZH_VALUE_TAIL.sub("", raw.strip()) if zh else _VALUE_TAIL.sub("", raw.strip(" .\"'"))).strip()
        value = value.lower()
        subject = m.group("s").strip().lower()
        if len(subject.split()) > MAX_SUBJECT_WORDS:
            # "Alex needs to stock up on Alex's favourite sauce, …": the possessor is the last word.
            if not pattern.pattern.startswith(f"^{_S}['’]s"):
                continue
            subject = subject.split()[-1]
        if not value or not subject:
            return None
        kind = groups.get("k")
        if kind:
            kind = kind.strip().lower()
            kind = (_ZH_PET_WORDS.get(kind, kind) if zh else _EN_PET_WORDS.get(kind, kind))
            attribute = f"{attribute}:{kind}"
        return Claim(attribute, subject, value, negated, bool(_INSTEAD.search(text)))
    return None


# --- One grammar: the statement model decides the slots it knows; these rules alone only what it has no slot for.
# Attributes the statement model (conversations/statements.py) does not tag: a favourite of a kind, a
# wake-up time, a pet's death, a trip "instead", a like said negatively in the rules' words. For employer,
# title, home and partner a supersede needs the model to read a state change; the patterns' claims are then
# one of three readers of which slot changed and which is held (slot_supersedes; bench/RESULTS.md).
RULE_ATTRIBUTES = ("favourite", "wakes_up", "pet", "plan", "likes")


def _same(a: str, b: str) -> bool:
    return bool(a and b) and (a in b or b in a)


def statement_contradicts(new, old) -> bool:
    """Whether statement `new` (conversations.statements.Statement) makes `old` out of date: a value
    that stopped holding ("quit Contoso") against the same current value, another current value of
    a single-valued slot ("now at Fabrikam" against "at Contoso"), an end said without a value
    ("I quit my job") against any current value, a dislike against the same like."""
    same = _same
    for slot in new.slots:
        olds = old.current(slot.type)
        if slot.ended and any(same(slot.key, o.key) for o in olds):
            return True
        if not slot.ended and slot.type in SINGLE_VALUED_SLOTS and olds and not any(same(slot.key, o.key) for o in olds):
            return True
        if slot.type == "dislike" and any(same(slot.key, o.key) for o in old.current("like")):
            return True
    return any(kind in new.ends and not new.current(kind) and old.current(kind) for kind in SINGLE_VALUED_SLOTS)


def changes_state(statement, reading=None) -> bool:
    """Whether the token model or the e5 head (`reading`) reads a state change ("quit", "now at",
    "搬到"): the model's slots supersede only then. A sentence that merely names a job or a place ("my
    brother got a job at Tailspin") was what made the model's wrong supersedes (bench/RESULTS.md, issue
    35: 2 of 41 non-updates of the dev set without this gate, 0 with it)."""
    return statement.kind == "state_change" or (reading is not None and reading.kind == "state_change")


def supersedes(new_text: str, old_text: str, subject: str = "", new_reading=None, old_reading=None) -> bool:
    """Whether the newer fact makes the older one out of date, both about `subject` (the fact's subject);
    `new_reading`/`old_reading` are the e5 head's readings of their vectors where it applies."""
    new, old = read(new_text, subject), read(old_text, subject)
    new_claim = claim(new_text)
    if changes_state(new, new_reading) and (
            slot_supersedes(new, old, new_claim, claim(old_text), new_reading, old_reading)
            or statement_contradicts(new, old)):
        return True
    return (new_claim is not None and new_claim.attribute.split(":")[0] in RULE_ATTRIBUTES
            and contradicts(new_claim, claim(old_text)))


# The patterns' attributes that are the statement model's single-valued slots.
SLOT_OF_ATTRIBUTE = {"works_at": "employer", "works_as": "title", "lives_in": "location", "partner": "partner"}


def _rule_slot(c: Claim | None) -> str:
    return SLOT_OF_ATTRIBUTE.get(c.attribute, "") if c is not None else ""


def slot_supersedes(new, old, new_claim, old_claim, new_reading=None, old_reading=None) -> bool:
    """Whether the newer statement changes a single-valued slot (employer, title, home, partner) that
    the older one holds. Three readers vote, and any one suffices on each side: the token model's slots
    (`new`, `old`: statements.Statement), the e5 head (`new_reading`, `old_reading`) and the patterns'
    claims — each misses what another reads ("Alex在阿里巴巴上班" is read by the patterns, "Alex辞职了，
    准备自己创业" by the head). The values then veto two cases: the same value said again ("now
    at Fabrikam" after "at Fabrikam"), and the end of another value than the older one's ("quit
    Contoso" after "works at Fabrikam")."""
    new_rule, old_rule = _rule_slot(new_claim), _rule_slot(old_claim)
    changed = {s.type for s in new.slots if s.type in SINGLE_VALUED_SLOTS} | set(new.ends) | {new_rule} - {""}
    held = {s.type for s in old.current_values()} | ({old_rule} if old_rule and not old_claim.negated else set())
    if new_reading is not None:
        changed |= set(new_reading.changes)
    if old_reading is not None:
        held |= set(old_reading.holds)
    for slot_type in changed & held:
        was = [s.key for s in old.current(slot_type)] + ([old_claim.value] if old_rule == slot_type else [])
        now = [s.key for s in new.current(slot_type)]
        ended = [s.key for s in new.slots if s.type == slot_type and s.ended]
        if new_rule == slot_type:
            (ended if new_claim.negated else now).append(new_claim.value)
        if was and now and not ended and any(_same(a, b) for a in was for b in now):
            continue
        if was and ended and not now and not any(_same(a, b) for a in was for b in ended):
            continue
        return True
    return False
