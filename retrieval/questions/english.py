"""Questions an English statement answers, from its own structure (no model): the clause's subject and
verb found by shape, then one question per answerable part — a date ("When did Alex join Contoso?"),
a count ("How many employees does the company have?"), a place ("Where does Alex work?"), the subject
("Who works at Contoso?"), a definition ("What is a cobra?").

The grammar is rough on purpose: the questions are matched by an embedding and by BM25 against the
user's question, which is written the same way; a wrong inflection costs little, a missing wh-word
(the part a question shares with its answer's question, and no statement has) costs the match.
"""

import re

AUX = {"is", "are", "was", "were", "can", "could", "will", "would", "should", "may", "might", "must"}
HAVE = {"has": "does", "have": "do", "had": "did"}
# Words that end like a verb ("-s", "-ed") but are not the clause's verb.
NOT_VERBS = {"this", "is", "his", "its", "was", "has", "as", "us", "thus", "plus", "across", "its", "series",
             "news", "always", "perhaps", "towards", "unless", "whereas", "besides", "red", "bed", "need", "seed",
             "speed", "feed", "hundred", "based", "used", "called", "named", "located", "related", "needed"}
KNOWN_PAST = {"went": "go", "made": "make", "took": "take", "gave": "give", "became": "become", "began": "begin",
                  "left": "leave", "met": "meet", "said": "say", "found": "find", "got": "get", "won": "win",
                  "wrote": "write", "built": "build", "bought": "buy", "sold": "sell", "led": "lead", "ran": "run",
                  "grew": "grow", "held": "hold", "came": "come", "saw": "see", "knew": "know", "lost": "lose",
                  "spent": "spend", "taught": "teach", "told": "tell", "paid": "pay", "moved": "move",
                  "lived": "live", "joined": "join", "worked": "work", "studied": "study", "founded": "found"}
DETERMINERS = {"the", "a", "an", "this", "that", "these", "those", "its", "their", "his", "her", "our", "my", "your"}
PRONOUNS = {"he", "she", "it", "they", "we", "you"}
MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
         r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
DATE_RE = re.compile(
    rf"(?:\b(?:on|in|since|by|from|until|at|during)\s+)?(?:\b\d{{1,2}}(?:st|nd|rd|th)?\s+{MONTH}\b,?(?:\s+\d{{4}})?"
    rf"|\b{MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?|\b{MONTH}\s+\d{{4}}\b|\b\d{{4}}-\d{{2}}-\d{{2}}\b"
    r"|\b(?:in|since|by|from|until|during)\s+(?:the\s+)?\d{4}s?\b|\b(?:yesterday|today|tomorrow|last\s+\w+|next\s+\w+))",
    re.IGNORECASE)
COUNT_RE = re.compile(r"\b(?:about|around|over|nearly|almost|more than|less than|some)?\s*(\d[\d,.]*)\s+([a-z][a-z-]+)")
PLACE_RE = re.compile(r"\b(at|in|from|to|near|for)\s+((?:the\s+)?[A-Z][\w&'.-]*(?:\s+(?:of\s+)?[A-Z][\w&'.-]*)*)")
WORD_RE = re.compile(r"[A-Za-z][\w'&.-]*|\S")
MAX_SUBJECT_WORDS = 6


def questions(sentence: str) -> list[str]:
    """The questions one English sentence answers, best first (none when no clause is found)."""
    sentence = sentence.strip().rstrip(".!;:")
    words = sentence.split()
    if len(words) < 3 or sentence.endswith("?"):
        return []
    v = _verb_at(words)
    if v is None:
        return []
    subject, verb, rest = " ".join(words[:v]), words[v].lower(), " ".join(words[v + 1:])
    subject_q = _lower_determiner(subject)
    out = []
    date = DATE_RE.search(rest)
    if date:
        out.append(f"When {_inverted(subject_q, verb, _without(rest, date))}?")
    count = COUNT_RE.search(rest)
    if count and not (date and count.start() < date.end() and date.start() < count.end()):
        noun = count.group(2)
        out.append(f"How many {noun} {_inverted(subject_q, verb, _without(rest, count))}?")
    place = PLACE_RE.search(rest)
    if place and place.group(1) in ("at", "in", "from", "to", "near") and not (date and date.start() <= place.start() < date.end()):
        out.append(f"Where {_inverted(subject_q, verb, _without(rest, place))}?")
    if verb in ("is", "are", "was", "were") and not out:
        out.append(f"{'Who' if _is_name(subject) else 'What'} {verb} {subject_q}?")
    who = "Who" if _is_name(subject) else "What"
    out.append(f"{who} {verb} {rest}?")
    return [_tidy(q) for q in out]


def _verb_at(words: list[str]) -> int | None:
    for i, word in enumerate(words[: MAX_SUBJECT_WORDS + 1]):
        w = word.lower().strip(",")
        if i == 0 or not word[:1].islower() or not w.isalpha() or w in DETERMINERS:
            continue
        if w in AUX or w in HAVE or w in KNOWN_PAST:
            return i
        if w in NOT_VERBS or len(w) < 4:
            continue
        if w.endswith("ed") or (w.endswith("s") and not w.endswith("ss") and words[i - 1].lower() not in DETERMINERS):
            return i
    return None


def _inverted(subject: str, verb: str, rest: str) -> str:
    """The clause as a question's body: the auxiliary before the subject, or do-support."""
    rest = rest.strip(" ,")
    if verb in AUX:
        return f"{verb} {subject} {rest}"
    if verb in HAVE:
        return f"{HAVE[verb]} {subject} have {rest}"
    if verb in KNOWN_PAST or verb.endswith("ed"):
        return f"did {subject} {_base(verb)} {rest}"
    return f"does {subject} {_base(verb)} {rest}"


def _base(verb: str) -> str:
    if verb in KNOWN_PAST:
        return KNOWN_PAST[verb]
    for ending, replacement in (("ied", "y"), ("ies", "y"), ("sses", "ss"), ("ches", "ch"), ("shes", "sh"), ("xes", "x")):
        if verb.endswith(ending):
            return verb[: -len(ending)] + replacement
    if verb.endswith("ed"):
        stem = verb[:-2]
        if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "ls":
            return stem[:-1]  # stopped -> stop
        return stem
    return verb[:-1] if verb.endswith("s") else verb


def _without(text: str, match: re.Match) -> str:
    return f"{text[:match.start()]} {text[match.end():]}"


def _lower_determiner(subject: str) -> str:
    first, _, tail = subject.partition(" ")
    return f"{first.lower()} {tail}".strip() if first.lower() in DETERMINERS | PRONOUNS else subject


def _is_name(subject: str) -> bool:
    words = subject.split()
    return 0 < len(words) <= 4 and all(w[:1].isupper() for w in words) and words[0].lower() not in DETERMINERS


def _tidy(question: str) -> str:
    question = re.sub(r"\s+", " ", question).replace(" ?", "?").replace(" ,", ",")
    return question[:1].upper() + question[1:]
