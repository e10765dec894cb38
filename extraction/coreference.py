"""Safe pronoun resolution: first and second person in chats, third person only when unambiguous (documents:
document_coreference.py).

Every rule here prefers leaving a pronoun alone to guessing: a wrong name in a fact is worse than a
pronoun the reader can resolve from the cited message.
"""

import re
from dataclasses import dataclass
from functools import lru_cache

# Documents' coreference has its own module; its names stay importable from here.
from extraction.document_coreference import DOCUMENT_WINDOW as DOCUMENT_WINDOW
from extraction.document_coreference import DocumentReferents as DocumentReferents
from extraction.document_coreference import prefix_topic as prefix_topic

# Past forms that must not take a third-person "-s" after "I went" → "Caroline went".
_IRREGULAR_PAST = set(
    "was were went saw got made took found came gave knew thought told felt left kept met ran said sat stood "
    "wrote read heard held brought bought taught caught began drew drove ate fell flew forgot grew hid hit "
    "hurt lost meant paid put quit rode rang rose sang sent set shot shut slept spent spoke stole swam threw "
    "understood woke won wore built chose cut did dug fed fought forgave froze had hung laid led lent let lit "
    "sold shook shone sank slid spun split spread struck swept swung tore wept became bet bit blew broke burnt "
    "cast crept dealt dreamt fled knelt leapt learnt sought spat stung stank strode dove been gotten done".split()
)
_MODALS = set("can could will would shall should may might must cannot can't won't wouldn't couldn't shouldn't".split())
# Words that can sit between the subject and its verb without changing the verb's form.
_ADVERBS = set(
    "really just also still never always often usually even actually recently finally sometimes totally "
    "definitely already truly mostly rarely seriously absolutely literally kinda sorta gotta wanna gonna "
    "only ever generally currently personally honestly first once later "
    # Time and negation words of an update ("I now work at…", "I no longer live in…", issue 28).
    "now no longer not then again newly soon almost nearly hardly barely typically normally probably "
    "maybe".split()
)
_NOT_VERBS = set("and or but to too so as the a an not that this it if in on at of for with about all".split())
_AGREE = {
    "am": "is",
    "'m": "is",
    "are": "is",
    "'re": "is",
    "were": "was",
    "have": "has",
    "'ve": "has",
    "do": "does",
    "don't": "doesn't",
    "haven't": "hasn't",
    "aren't": "isn't",
    "weren't": "wasn't",
}

# Not inside hyphenated words: "me-time" stays.
_FIRST_PERSON = re.compile(r"(?<![\w-])(?:I['’](?:m|ve|d|ll)|I|[Mm]e|[Mm]y|[Mm]ine|[Mm]yself)(?![\w-])")
_SECOND_PERSON = re.compile(
    r"\b(?:you['’](?:re|ve|d|ll)|you|your|yours|yourself)\b(?!\s+(?:guys|all|two|both|folks|people)\b)", re.I
)
_CLAUSE_START = re.compile(
    r"(?:^|[,;:]\s*|\b(?:and|but|that|if|when|because|so|as|since|while|where|though)\s+)$", re.I
)
_NEXT_WORD = re.compile(r"\s+([a-z']+)")
# A question puts its auxiliary before the subject ("Do you need…?", "Why don't you…?", "How long have
# you…?"): once the pronoun is a name, that auxiliary is the one to agree ("Does Alice need…?") and the
# verb after the name stays as it is. Only at a clause start, or a wh-word and up to two words on.
_INVERTED = re.compile(
    r"(?:^|[.!?,;:\"“(]\s*|\b(?:and|but|or|so|then|well|oh|hey)\s+"
    r"|\b(?:what|why|how|where|when|who|whom|which|whose)\s+(?:[a-z]+\s+){0,2})"
    r"(?:do|don['’]t|have|haven['’]t|are|aren['’]t|were|weren['’]t|am)\s+$", re.I
)

_KIN = (
    r"friend|sister|brother|mom|mum|mother|dad|father|son|daughter|wife|husband|boyfriend|girlfriend|partner|"
    r"cousin|aunt|uncle|grandma|grandmother|grandpa|grandfather|niece|nephew|colleague|coworker|co-worker|boss|"
    r"neighbou?r|teacher|mentor|roommate|kid|child|baby|fiancée?|therapist|coach|doctor|buddy|pal"
)
_NAMED = re.compile(
    r"(?:\b(?:(?i:my|his|her|our|their|your)|[A-Z][a-z]+['’]s)\s+(?i:(?:best|old|new|little|big|older|younger|good|"
    r"close|dear)\s+)?(?i:" + _KIN + r")s?\s*,?\s+|\b(?:named|called|Mr\.?|Mrs\.?|Ms\.?|Dr\.?|Prof\.?|Aunt|Uncle)\s+)"
    r"(?P<name>[A-Z][a-z]+(?:\s[A-Z][a-z]+)?)"
)
_ANONYMOUS = re.compile(r"\b(?:my|his|her|our|their|your|a|the|this|that)\s+(?:\w+\s+)?(?:" + _KIN + r")s?\b", re.I)
_THIRD_PERSON = re.compile(r"\b(?:she|he|her|him|his)\b", re.I)

_ZH_KIN = (
    "朋友|妈妈|母亲|爸爸|父亲|姐姐|妹妹|哥哥|弟弟|女儿|儿子|老婆|老公|妻子|丈夫|同事|老板|老师|男朋友|女朋友|邻居|孩子"
)
_ZH_THIRD = re.compile(r"(?<![其吉])[他她](?![们人])")


@dataclass
class Mention:
    """A person mentioned in a sentence: a name, or an unnamed one ("my sister") that competes with names."""

    key: str
    name: str = ""  # empty for unnamed mentions


def resolve_first_person(text: str, speaker: str) -> str:
    """'I went' → 'Caroline went', 'my dog' → "Caroline's dog"; '我' → '小明' (never 我们 or 自我)."""
    if not speaker:
        return text

    def replace(match: re.Match) -> str:
        word = match.group(0).replace("’", "'")
        lower = word.lower()
        if lower in ("my", "mine"):
            return f"{speaker}'s"
        if lower == "myself":
            return "themself"
        if lower == "me":
            return speaker
        contraction = {"i'm": "'m", "i've": "'ve", "i'll": "will", "i'd": "'d"}.get(lower)
        if contraction == "will":
            return f"{speaker} will"
        if contraction == "'d":
            following = _word_after(text, match.end())
            return f"{speaker} had" if _looks_past(following) else f"{speaker} would"
        if contraction:
            return f"{speaker} {_AGREE[contraction]}"
        if _INVERTED.search(text[: match.start()]):
            return "\x02" + speaker  # "Am I late?" → "Is Caroline late?"
        return speaker + "\x00"  # the verb after it must now agree with a third-person subject

    text = _apply_agreement(_FIRST_PERSON.sub(replace, text))
    return re.sub(r"(?<!自)我(?!们)", lambda _: speaker, text)  # a function: names are not templates


def resolve_second_person(text: str, listener: str) -> str:
    """'you' → the other speaker of a two-person chat; 'thank you' and 'you guys' stay as they are."""
    if not listener or re.search(r"[\u4e00-\u9fff]", text):
        # Not 你们 (plural), 你好 (a greeting) or 迷你 ("mini").
        return re.sub(r"(?<!迷)[你您](?![们好])", lambda _: listener, text) if listener else text

    def replace(match: re.Match) -> str:
        word = match.group(0).replace("’", "'").lower()
        before = text[: match.start()]
        if re.search(r"\b(?:thank|see|love|miss|bless)\s+$", before, re.I) or re.match(
            r"\s+know\s*,", text[match.end() :]
        ):
            return match.group(0)
        name = listener[:1].upper() + listener[1:] if match.group(0)[:1].isupper() else listener
        if word in ("your", "yours"):
            return f"{name}'s"
        if word == "yourself":
            return "themself"
        if word in ("you're", "you've"):
            return f"{name} {_AGREE[word[3:]]}"
        if word == "you'll":
            return f"{name} will"
        if word == "you'd":
            return f"{name} would"
        if _INVERTED.search(before):
            return "\x02" + name
        return name + ("\x00" if _CLAUSE_START.search(before) else "\x01")

    return _apply_agreement(_SECOND_PERSON.sub(replace, text))


def fewer_repeats(text: str, participants: list[str]) -> str:
    """"Gina is growing Gina's store with Gina's friends" → "Gina is growing their store with their friends".

    Resolving every "my" to the name repeats it; after the first mention a possessive is "their",
    unambiguous while the fact names no other participant. (Each repeat also counts as one more
    match for a question that names the person, so the most repetitive statements used to outrank
    the ones that answer.)
    """
    named = [p for p in participants if p and re.search(rf"(?<![\w]){re.escape(p)}(?![\w])", text)]
    if len(named) != 1:
        return text
    possessive = re.compile(rf"(?<![\w]){re.escape(named[0])}'s(?![\w])")
    first = re.search(rf"(?<![\w]){re.escape(named[0])}(?![\w])", text)
    head, tail = text[: first.end()], text[first.end() :]
    return head + possessive.sub("their", tail)


def _apply_agreement(text: str) -> str:
    """Make the verb after a marked subject agree: \\x00 any verb, \\x01 only be/have/do forms; \\x02
    before the subject: the auxiliary of a question, before it."""

    def agree(match: re.Match) -> str:
        marker, words = match.group(1), match.group(2).split()
        for i, word in enumerate(words):
            lower = word.lower()
            if lower in _ADVERBS or lower.endswith("ly"):
                continue
            if lower in _AGREE and lower[0] != "'":
                words[i] = _AGREE[lower]
            elif marker == "\x00" and _is_base_verb(lower):
                words[i] = _third_person_form(lower)
            break
        return " " + " ".join(words)

    def agree_before(match: re.Match) -> str:
        word = match.group(1)
        agreed = _AGREE.get(word.lower().replace("’", "'"), word)
        return (agreed[:1].upper() + agreed[1:] if word[:1].isupper() else agreed) + match.group(2)

    # Up to three words: the verb may follow two adverbs ("I now no longer work…" aside, "I just now got…").
    text = re.sub(r"([\x00\x01])((?:\s+[A-Za-z']+){1,3})", agree, text)
    text = re.sub(r"([A-Za-z'’]+)(\s+)\x02", agree_before, text)  # \x02: the auxiliary before the name
    return text.replace("\x00", "").replace("\x01", "").replace("\x02", "")


def _is_base_verb(word: str) -> bool:
    return (
        word.isalpha()
        and word not in _IRREGULAR_PAST
        and word not in _MODALS
        and word not in _NOT_VERBS
        and not (word.endswith("ed") and not word.endswith("eed"))  # "need", "feed" are base forms
        and not word.endswith("ing")
    )


def _third_person_form(verb: str) -> str:
    if verb == "have":
        return "has"
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(verb) > 2 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _word_after(text: str, position: int) -> str:
    match = _NEXT_WORD.match(text, position)
    return match.group(1).lower() if match else ""


def _looks_past(word: str) -> bool:
    return word.endswith("ed") or word in _IRREGULAR_PAST or word in ("been", "never", "already", "just")


def mentions(text: str, *, exclude: set[str] = frozenset(), chinese: bool = True) -> list[Mention]:
    """People a sentence mentions, in order: named ones ("my friend Anna") and unnamed ones ("my sister")."""
    found: list[tuple[int, Mention]] = []
    named_spans = []
    for match in _NAMED.finditer(text):
        name = match.group("name")
        named_spans.append(match.span())
        if name not in exclude:
            found.append((match.start("name"), Mention(name.lower(), name)))
    for match in _ANONYMOUS.finditer(text):
        if not any(start <= match.start() < end for start, end in named_spans):
            found.append((match.start(), Mention(match.group(0).lower())))
    if chinese and re.search(r"[\u4e00-\u9fff]", text):
        found.extend(_zh_mentions(text, exclude))
    return [m for _, m in sorted(found, key=lambda pair: pair[0])]


def _zh_mentions(text: str, exclude: set[str]) -> list[tuple[int, Mention]]:
    found, position = [], 0
    for word, flag in _posseg().lcut(text):
        if flag == "nr" and len(word) >= 2 and word not in exclude:
            found.append((position, Mention(word, word)))
        elif re.fullmatch(_ZH_KIN, word):
            found.append((position, Mention(word)))
        position += len(word)
    return found


@lru_cache(maxsize=1)
def _posseg():
    import jieba.posseg  # noqa: PLC0415 - loaded only for Chinese conversations

    return jieba.posseg


def known_name_mentions(text: str, names: set[str]) -> list[Mention]:
    """Mentions of names already seen in the unit ("Anna came too"), which the cue patterns miss."""
    return [Mention(n.lower(), n) for n in names if re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", text)]


def has_third_person(text: str) -> bool:
    return bool(_THIRD_PERSON.search(text) or _ZH_THIRD.search(text))


class MentionHistory:
    """The people the last few sentences of a conversation mention, for he/she look-back."""

    # Mentions are worked out only for the window a pronoun actually looks at: the Chinese pass needs
    # jieba's part-of-speech tagger (about a millisecond per sentence, and 1-2 s to load once).

    def __init__(self, *, exclude: set[str], known: set[str], size: int):
        self.exclude, self.known, self.size = exclude, set(known), size
        self._said: list[list] = []  # [sentence, source id, mentions or None until needed]

    def add(self, sentence: str, source_id: str) -> None:
        # Names introduced with a cue ("my friend Anna") are remembered at once, so later bare
        # mentions ("Anna came too") count as mentions of her.
        self.known.update(m.name for m in mentions(sentence, exclude=self.exclude, chinese=False) if m.name)
        self._said.append([sentence, source_id, None])

    def window(self) -> list[Mention]:
        out = []
        for said in self._said[-self.size :]:
            if said[2] is None:
                found = mentions(said[0], exclude=self.exclude)
                said[2] = found + known_name_mentions(said[0], self.known - {m.name for m in found})
            out.extend(said[2])
        return out

    def source_of(self, name: str) -> list[str]:
        """The source id of the most recent sentence in the window that names `name`."""
        for said in reversed(self._said[-self.size :]):
            if said[2] and any(m.name == name for m in said[2]):
                return [said[1]]
        return []


def resolve_third_person(text: str, window: list[Mention]) -> tuple[str, str]:
    """Replace the first he/she/他/她 with the one person the preceding window names, if there is exactly one.

    Returns the text and the name used ("" when left alone: no pronoun, none or several candidates, or
    the sentence names someone itself before the pronoun).
    """
    people = {m.key for m in window}
    named = [m for m in window if m.name]
    if len(people) != 1 or not named:
        return text, ""
    name = named[-1].name
    zh = _ZH_THIRD.search(text)
    en = _THIRD_PERSON.search(text)
    match = min((m for m in (zh, en) if m), key=lambda m: m.start(), default=None)
    if match is None or mentions(text[: match.start()]) or name in text[: match.start()]:
        return text, ""
    word = match.group(0)
    if word in "他她":
        replacement = name
    elif word.lower() == "his" or (word.lower() == "her" and _is_possessive_her(text, match.end())):
        replacement = f"{name}'s"
    else:
        replacement = name
    return text[: match.start()] + replacement + text[match.end() :], name


def _is_possessive_her(text: str, end: int) -> bool:
    """'her dog' is possessive, 'told her about' / 'saw her.' are objects."""
    following = _word_after(text, end)
    return (
        bool(following)
        and following not in _NOT_VERBS
        and following
        not in (
            "about",
            "up",
            "out",
            "back",
            "again",
            "yesterday",
            "today",
            "tomorrow",
            "last",
            "from",
            "into",
            "by",
        )
    )


# A chat question ends with a question mark (closing quotes allowed); a bracketed note after it
# ("[shares a photo of …]") does not make it a statement.
_ASKED = re.compile(r"[?？][\"'”’)）]*(?:\s*\[[^\]]*\])?$")
# A tag ("…, right?", "…, you know?") asks for agreement, not information.
_TAG_QUESTION = re.compile(r"(?:\b(?:right|huh|eh|you know|ok|okay|yeah)|n't (?:it|they|you|he|she|we))\s*[?？]$", re.I)
# Small talk: a question made only of these words ("Anything new lately?", "What's been happening
# since we last talked?") is about nothing in particular, so the answer gains nothing from it.
SMALL_TALK = frozenset(
    """new lately recently happening happened happen going doing else since last talked talk chat chatted
    coming interesting fun exciting news share stories fill life week weekend today days""".split()
)


@dataclass
class Question:
    """The question a chat turn left open, for the other speaker's next turn to answer."""

    asker: str
    text: str  # as asked, pronouns resolved ("What got Melanie into running?")
    source_id: str


def open_question(sentences: list[str], asker: str, listener: str, source_id: str) -> Question | None:
    """The last question of a turn, with "I"/"you" resolved to the asker and the listener; None if it asks none."""
    asked = [s for s in sentences if _ASKED.search(s.strip())]
    if not asked:
        return None
    question = re.sub(r"\s*\[[^\]]*\]$", "", asked[-1].strip())
    if _TAG_QUESTION.search(question):
        return None
    text = resolve_second_person(resolve_first_person(question, asker), listener)
    return Question(asker, text[:1].upper() + text[1:], source_id)


def asks_something(sentences: list[str]) -> bool:
    """Whether a turn asks a question (a tag like "…, right?" aside) that the next speaker may answer."""
    return open_question(sentences, "", "", "") is not None


def in_reply(answer: str, speaker: str, question: Question) -> str:
    """An elliptical answer made self-contained by its question.

    "It was Matt Patterson!" alone says nothing about a concert; after "Caroline asked: What
    concert was it?" it does. The speaker is named unless the answer already names them.
    """
    if re.search(r"[\u4e00-\u9fff]", question.text + answer):  # 小红问：你去哪儿了？小明：去了故宫。
        said = answer if not speaker or speaker in answer else f"{speaker}：{answer}"
        return f"{question.asker}问：{question.text}{said}" if question.asker else f"{question.text}{said}"
    said = answer if not speaker or speaker.lower() in answer.lower() else f"{speaker}: {answer}"
    return f"{question.asker} asked: {question.text} {said}" if question.asker else f"{question.text} {said}"
