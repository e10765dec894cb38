"""Chat segments: a fact per informative statement with its pronouns resolved, a summary of who talked about what.

In a chat "I", "you" and a recent "she" name people, and an answer means little without the
question it answers, so facts here carry the speaker and, where it gives them sense, the question.
"""

import re

from extraction import coreference, salience, summaries
from extraction.base import ExtractionUnit, Passage
from extraction.candidates import QUESTION, Candidate, as_datetime, clean, is_statement, says_enough
from extraction.dates import english_day, resolve_relative_dates
from extraction.sentences import is_cjk_text, split_clauses, split_sentences

WINDOW = 3  # sentences back in which a he/she antecedent is looked for

# A note a chat client adds to a message ("[shares a photo of a cake]"), at its end.
_TRAILING_NOTE = re.compile(r"\s*(\[[^\[\]]{3,}\])\s*$")
_NOTE = re.compile(r"\[([^\[\]]{3,})\]")
_SIGN_OFF = re.compile(
    r"^(?:have (?:fun|a good)|take care|let me know|keep (?:it up|me posted|you posted)|stay safe|good luck|"
    r"see (?:you|ya)|talk (?:soon|later)|catch you|bye|thanks for|thank you for)\b",
    re.I,
)


# The frame of an AI assistant's reply, not its content: "By following these tips, you'll…",
# "Hopefully, these tips will help…", "Keep in mind that…". Such sentences share a question's words
# ("tips", "lately") and outranked the user's own statements (bench/RESULTS.md, issue 20).
# Only for speakers named in the unit's context["assistant_speakers"]; people's chat is unchanged.
_ASSISTANT_FRAME = re.compile(
    r"^(?:(?:by (?:following|implementing|incorporating|using|trying) (?:these|this|the above)|hopefully|"
    r"i hope (?:this|these|that)|keep in mind|overall|in summary|in conclusion|to summari[sz]e|feel free|"
    r"don'?t hesitate|i'?d be (?:happy|glad)|i'?m (?:happy|glad) to|here (?:are|is|'s) (?:some|a few|a list|an?)|"
    r"(?:that'?s|what) a (?:great|good|fantastic|wonderful)|great (?:question|idea|choice)|good luck|enjoy)\b"
    r"|sure[!,.]|of course[!,.])",
    re.I,
)


def participants(unit: ExtractionUnit, passages: list[Passage]) -> list[str]:
    named = unit.context.get("participants") or []
    speakers = [p.speaker for p in passages if p.speaker]
    return list(dict.fromkeys([*[str(n) for n in named if n], *speakers]))


def candidates(unit: ExtractionUnit, passages: list[Passage], participants: list[str]) -> list[Candidate]:
    out: list[Candidate] = []
    two_party = len(participants) == 2
    # In a two-person chat "she" is never one of the two speakers: they are "I" and "you".
    not_antecedents = set(participants) if two_party else set()
    history = coreference.MentionHistory(
        exclude=not_antecedents, known=set(participants) - not_antecedents, size=WINDOW
    )
    asked: coreference.Question | None = None
    assistants = set(unit.context.get("assistant_speakers") or ())
    for passage in passages:
        speaker = passage.speaker
        listener = next((p for p in participants if p != speaker), "") if two_party else ""
        reference = passage.timestamp or unit.reference_time
        answers = asked if asked and asked.asker != speaker else None
        sentences = _notes_apart(split_sentences(passage.text))
        for sentence in _stated_in_questions(sentences):
            cleaned = clean(sentence, participants)
            if speaker in assistants and _ASSISTANT_FRAME.match(cleaned.strip()):
                history.add(cleaned, passage.source_id)
                continue
            note = _NOTE.fullmatch(cleaned)
            if note:  # "[shares a photo of …]": what the speaker shared is a statement of its own
                out.append(Candidate(f"{speaker} {note.group(1)}" if speaker else note.group(1), cleaned,
                                     [passage.source_id], len(out), speaker=speaker, turn=passage.source_id,
                                     occurred_at=passage.timestamp, answers=answers, is_note=True))
                continue
            for clause in split_clauses(cleaned):
                text, antecedent = clause, ""
                if coreference.has_third_person(clause):
                    text, antecedent = coreference.resolve_third_person(clause, history.window())
                text = coreference.resolve_first_person(text, speaker)
                text = coreference.resolve_second_person(text, listener)
                text = coreference.fewer_repeats(text, participants)
                text, resolved = resolve_relative_dates(text, reference)
                sources = [passage.source_id]
                if antecedent:
                    sources = history.source_of(antecedent) + sources
                out.append(
                    Candidate(
                        _capitalised(text),
                        clause,
                        list(dict.fromkeys(sources)),
                        len(out),
                        speaker=speaker,
                        turn=passage.source_id,
                        occurred_at=as_datetime(resolved, reference) or passage.timestamp,
                        answers=answers,
                    )
                )
            history.add(cleaned, passage.source_id)
        asked = coreference.open_question([clean(s, participants) for s in sentences], speaker, listener,
                                          passage.source_id)
    return out


# A statement told inside a question ("…what time should I start my jog, considering I like to wake up
# at 7:30 am on Saturdays?", LongMemEval 48_dad224aa): the question is no fact, the reason it gives
# is one. Only a first-person clause after a conjunction of reason; the rest of the question stays out.
_STATED_IN_QUESTION = re.compile(
    r"(?:,|\b)\s*(?:considering(?: that)?|given(?: that)?|since|because|as|now that|seeing as)\s+"
    r"(?P<s>I(?:'m|'ve|'d| am| have| had| was| usually| always| often| like| love| prefer| need| want| wake| "
    r"work| live| get| go)\b[^?]{6,160}?)\s*[?]$")
_ZH_STATED_IN_QUESTION = re.compile(r"(?:考虑到|因为|既然|由于)(?P<s>我[^，。？?！!]{3,60})[，,][^。]*[？?]$")


def _stated_in_questions(sentences: list[str]) -> list[str]:
    """Each sentence, and after a question the first-person statement it gives as its reason."""
    out = []
    for sentence in sentences:
        out.append(sentence)
        m = _STATED_IN_QUESTION.search(sentence.strip()) or _ZH_STATED_IN_QUESTION.search(sentence.strip())
        if m:
            out.append(m.group("s").strip() + ("。" if is_cjk_text(m.group("s")) else "."))
    return out


def _notes_apart(sentences: list[str]) -> list[str]:
    """A bracketed note after a chat message's text ("… yum! [shares a photo of a cake]") as a sentence of its own."""
    out = []
    for sentence in sentences:
        note = _TRAILING_NOTE.search(sentence)
        out += [sentence[: note.start()], note.group(1)] if note and note.start() else [sentence]
    return out


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:] if text[:1].islower() else text


def attach_questions(candidates: list[Candidate], ignore: set[str]) -> None:
    """The first statement of a turn that follows another speaker's question carries that question.

    Chat answers are elliptical ("It was Matt Patterson!" to "What concert was it?"): without the
    question the fact is about nothing, and a turn that only asks is never a fact itself.
    """
    answered = set()
    for c in candidates:
        q = c.answers
        if q is None or q.source_id in answered or QUESTION.search(c.original) or _SIGN_OFF.match(c.original):
            continue
        if not [t for t in c.tokens if t not in salience.CHAT_FILLER]:
            continue  # "Thanks, Caroline!" answers nothing; the next statement may
        answered.add(q.source_id)
        asked = salience.terms(q.text, ignore=ignore)
        if not [t for t in asked if t not in salience.CHAT_FILLER and t not in coreference.SMALL_TALK]:
            continue  # "How about you?", "Anything new?" add nothing to what follows
        c.text = coreference.in_reply(c.text, c.speaker, q)
        c.tokens = asked + c.tokens
        # The fact's own message first, then the question that gives it its sense.
        c.source_ids = list(dict.fromkeys([*c.source_ids, q.source_id]))


def informative(c: Candidate, topic_hint: str) -> bool:
    """Drop what is not a fact: questions, sign-offs, small talk."""
    original = c.original.strip()
    if not is_statement(original, topic_hint) or _SIGN_OFF.match(original):
        return False
    meaningful = [t for t in c.tokens if t not in salience.CHAT_FILLER]
    return says_enough(original, meaningful, is_cjk_text(original))


def topic(participants: list[str], topic_words: list[str], zh: bool) -> str:
    who = ("和" if zh else " and ").join(participants[:3])
    if not topic_words:
        return who
    return f"{who}：{'、'.join(topic_words)}" if zh else f"{who}: {', '.join(topic_words)}"


def summary(
    kept: list[Candidate], participants: list[str], topic_words: list[str], passages: list[Passage], zh: bool
) -> str:
    budget = summaries.budget_for(zh)
    when = next((p.timestamp for p in passages if p.timestamp), None)
    who = ("和" if zh else " and ").join(participants[:3]) + (
        "" if len(participants) <= 3 else (" 等" if zh else " and others")
    )
    if zh:
        intro = (
            (f"{when.date().isoformat()}，" if when else "") + f"{who}聊了" + ("、".join(topic_words) or "近况") + "。"
        )
    else:
        about = f" about {', '.join(topic_words)}" if topic_words else ""
        intro = (f"On {english_day(when)}, " if when else "") + f"{who} talked{about}."
    picked = summaries.pick(kept, budget - summaries.size(intro, zh), zh)
    return summaries.trimmed(summaries.joined([intro, *(summaries.ended(c.text, zh) for c in picked)], zh), budget, zh)
