"""The extractor used when no LLM is configured: extractive, self-contained facts in milliseconds.

Facts are the unit's informative sentences (long ones split at safe clause boundaries), with pronouns
and relative dates resolved where that is safe; table rows become one fact each. The episode summary
is the unit's most central sentences in their original order.
"""

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, time

from ingest.extraction import coreference, salience
from ingest.extraction.base import ExtractedEpisode, ExtractedFact, ExtractionUnit, Passage
from ingest.extraction.dates import english_day, resolve_relative_dates
from ingest.extraction.sentences import has_cjk, is_cjk_text, split_clauses, split_sentences, table_rows

MAX_FACTS = 40  # an LLM extraction of one section yields 5-30 facts; more is noise for retrieval
# An AI assistant's reply (a speaker named in the unit's context["assistant_speakers"]) keeps at most
# this many statements, its most informative ones. A reply is ~1.8 KB of advice (LongMemEval-S: 89 %
# of all sentence facts): as sentences it outnumbered the user's own statements, won the MAX_FACTS
# cap against them (5 of the 30 evidence turns of the dev set lost every fact) and crowded the
# search results, and embedding it was most of the ingestion CPU.
ASSISTANT_FACTS_PER_TURN = 4
SUMMARY_WORDS = 80
SUMMARY_CHARS = 200  # Chinese: ~200 characters carry about what 80 English words do
SUMMARY_SENTENCES = 4
KEYWORD_SENTENCES = 15  # keywords come from the most central sentences only: cheaper, and on topic
WINDOW = 3  # sentences back in which a he/she antecedent is looked for

_LEADING_FILLER = re.compile(
    r"^(?:(?:oh my god|oh my|oh|wow|hey|hi|hello|well|so|yeah|yes|yep|no|nope|ok|okay|haha+|lol|um+|uh+|hmm+|ah+|"
    r"aw+|omg|gosh|man|dude|honestly|actually|anyway|anyways|btw|by the way|you know|i mean)\s*[,!.…]+\s*)+",
    re.I,
)
_ZH_FILLER = re.compile(
    r"^(?:嗯+|哈哈+|啊+|哦+|噢+|嘿+|嗨+|哇+|好吧|好的|其实|那个|对了|你好|您好|哈喽)[啊呀]?[，,！!。…~～]*"
)
_EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f\u200d]+")
_BOILERPLATE = re.compile(
    r"^(?:page\s*\d+(?:\s*(?:of|/)\s*\d+)?|-\s*\d+\s*-|\d+|第\s*\d+\s*页.*|copyright\b.*|©.*|all rights reserved\.?|"
    r"table of contents|contents|confidential|click here.*|privacy policy|terms of (?:use|service)|版权所有.*|目录)$",
    re.I,
)
_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl"})  # PDF text keeps them
_TERMINAL = re.compile(r"[.!?。！？;；:：\"'”’)）]$")
_QUESTION = re.compile(r"[?？][\"'”’)）]*$")
# A note a chat client adds to a message ("[shares a photo of a cake]"), at its end.
_TRAILING_NOTE = re.compile(r"\s*(\[[^\[\]]{3,}\])\s*$")
_NOTE = re.compile(r"\[([^\[\]]{3,})\]")
_SIGN_OFF = re.compile(
    r"^(?:have (?:fun|a good)|take care|let me know|keep (?:it up|me posted|you posted)|stay safe|good luck|"
    r"see (?:you|ya)|talk (?:soon|later)|catch you|bye|thanks for|thank you for)\b",
    re.I,
)


@dataclass
class _Candidate:
    text: str  # the fact as it will be stored
    original: str  # the sentence as written, for scoring and pronoun look-back
    source_ids: list[str]
    position: int
    speaker: str = ""
    turn: str = ""  # the message (chats) the sentence was said in
    occurred_at: datetime | None = None
    is_row: bool = False
    is_note: bool = False  # a chat client's note ("shares a photo of …"): a fact, never a topic word
    tokens: list[str] = field(default_factory=list)
    score: float = 0.0
    answers: coreference.Question | None = None  # chats: the other speaker's question this turn follows


class DeterministicExtractor:
    """Sentence-level extraction with safe pronoun and date resolution; no model, no network."""

    mode = "deterministic"

    def __init__(self, *, max_facts: int = MAX_FACTS):
        self.max_facts = max_facts

    def extract(self, unit: ExtractionUnit) -> ExtractedEpisode:
        passages = [p for p in unit.passages if p.text and p.text.strip()]
        text = "\n".join(p.text for p in passages)
        language = (unit.language or "auto").lower()
        zh = language.startswith("zh") or (language == "auto" and is_cjk_text(text))
        conversation = any(p.speaker for p in passages)
        participants = _participants(unit, passages)
        label = _topic_label(unit.topic_hint)
        ignore = {w for name in participants for w in (*salience.words(name), *salience.terms(name))}

        if conversation:
            candidates = self._conversation_candidates(unit, passages, participants)
        else:
            candidates = self._document_candidates(unit, passages, label)
        for c in candidates:
            c.tokens = salience.terms(c.original, ignore=ignore)
        if conversation:
            _attach_questions(candidates, ignore)
        kept = [c for c in candidates if _informative(c, conversation, unit.topic_hint)]
        if not kept:  # a one-line section still deserves a fact
            kept = [c for c in candidates if c.tokens and not _BOILERPLATE.match(c.original)][:3]
        kept = _deduplicated(kept)
        boost = set(salience.terms(unit.topic_hint))
        for c, score in zip(kept, salience.centrality([c.tokens for c in kept], boost=boost)):
            c.score = score

        assistants = set(unit.context.get("assistant_speakers") or ()) if conversation else set()
        facts = _capped_by_role(kept, self.max_facts, assistants) if assistants else _capped(kept, self.max_facts)
        # Keywords need real words (jieba for Chinese), and only where no section title names the topic.
        topic_words = []
        if conversation or not unit.topic_hint:
            top = sorted((c for c in kept if not c.is_note), key=lambda c: c.score, reverse=True)[:KEYWORD_SENTENCES]
            originals = [c.original for c in sorted(top, key=lambda c: c.position)]
            topic_words = salience.keywords(
                [salience.content_words(t, ignore=ignore) for t in originals], originals, ignore=ignore
            )
        if conversation:
            topic = unit.topic_hint or _conversation_topic(participants, topic_words, zh)
            summary = _conversation_summary(kept, participants, topic_words, passages, zh)
        else:
            topic = unit.topic_hint or ", ".join(topic_words)
            summary = _document_summary(kept, passages, zh)
        episode = ExtractedEpisode(
            topic=topic,
            summary=summary,
            facts=[
                ExtractedFact(c.text, c.source_ids, c.occurred_at, c.speaker if conversation else "", c.is_note)
                for c in facts
            ],
            source_ids=[p.source_id for p in passages],
            occurred_at=_episode_time(unit, passages),
        )
        episode.mode = self.mode
        return episode

    def _document_candidates(self, unit: ExtractionUnit, passages: list[Passage], label: str) -> list[_Candidate]:
        out: list[_Candidate] = []
        for passage in passages:
            reference = passage.timestamp or unit.reference_time
            rows = table_rows(passage.text)
            if rows:
                for row in rows:
                    out.append(
                        _Candidate(f"{label}: {row}" if label else row, row, [passage.source_id], len(out), is_row=True)
                    )
                continue
            for sentence in split_sentences(passage.text):
                for clause in split_clauses(sentence):
                    cleaned = _clean(clause)
                    text, resolved = resolve_relative_dates(cleaned, reference)
                    out.append(
                        _Candidate(
                            coreference.prefix_topic(text, label),
                            cleaned,
                            [passage.source_id],
                            len(out),
                            occurred_at=_as_datetime(resolved, reference),
                        )
                    )
        return out

    def _conversation_candidates(
        self, unit: ExtractionUnit, passages: list[Passage], participants: list[str]
    ) -> list[_Candidate]:
        out: list[_Candidate] = []
        two_party = len(participants) == 2
        # In a two-person chat "she" is never one of the two speakers: they are "I" and "you".
        not_antecedents = set(participants) if two_party else set()
        history = coreference.MentionHistory(
            exclude=not_antecedents, known=set(participants) - not_antecedents, size=WINDOW
        )
        asked: coreference.Question | None = None
        for passage in passages:
            speaker = passage.speaker
            listener = next((p for p in participants if p != speaker), "") if two_party else ""
            reference = passage.timestamp or unit.reference_time
            answers = asked if asked and asked.asker != speaker else None
            sentences = _notes_apart(split_sentences(passage.text))
            for sentence in sentences:
                cleaned = _clean(sentence, participants)
                note = _NOTE.fullmatch(cleaned)
                if note:  # "[shares a photo of …]": what the speaker shared is a statement of its own
                    out.append(_Candidate(f"{speaker} {note.group(1)}" if speaker else note.group(1), cleaned,
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
                        _Candidate(
                            _capitalised(text),
                            clause,
                            list(dict.fromkeys(sources)),
                            len(out),
                            speaker=speaker,
                            turn=passage.source_id,
                            occurred_at=_as_datetime(resolved, reference) or passage.timestamp,
                            answers=answers,
                        )
                    )
                history.add(cleaned, passage.source_id)
            asked = coreference.open_question([_clean(s, participants) for s in sentences], speaker, listener,
                                              passage.source_id)
        return out


def _notes_apart(sentences: list[str]) -> list[str]:
    """A bracketed note after a chat message's text ("… yum! [shares a photo of a cake]") as a sentence of its own."""
    out = []
    for sentence in sentences:
        note = _TRAILING_NOTE.search(sentence)
        out += [sentence[: note.start()], note.group(1)] if note and note.start() else [sentence]
    return out


def _attach_questions(candidates: list[_Candidate], ignore: set[str]) -> None:
    """The first statement of a turn that follows another speaker's question carries that question.

    Chat answers are elliptical ("It was Matt Patterson!" to "What concert was it?"): without the
    question the fact is about nothing, and a turn that only asks is never a fact itself.
    """
    answered = set()
    for c in candidates:
        q = c.answers
        if q is None or q.source_id in answered or _QUESTION.search(c.original) or _SIGN_OFF.match(c.original):
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


def _participants(unit: ExtractionUnit, passages: list[Passage]) -> list[str]:
    named = unit.context.get("participants") or []
    speakers = [p.speaker for p in passages if p.speaker]
    return list(dict.fromkeys([*[str(n) for n in named if n], *speakers]))


def _topic_label(topic_hint: str) -> str:
    """The last element of a section path: 'Guide › Install' → 'Install'."""
    parts = [p.strip() for p in re.split(r"\s*[›»]\s*|\s+>\s+", topic_hint) if p.strip()]
    return parts[-1] if parts else ""


def _clean(sentence: str, participants: list[str] = ()) -> str:
    text = _EMOJI.sub("", sentence).replace("’", "'").translate(_LIGATURES)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"([!?！？])\1+", r"\1", text)
    stripped = _ZH_FILLER.sub("", _LEADING_FILLER.sub("", text))
    # A leading vocative, by full name or a nickname that starts it: "Hey Caroline, I went…", "Mel, I…".
    for name in participants:  # "AI伴侣，今天…"
        stripped = re.sub(rf"^{re.escape(name)}\s*[,，!！]\s*", "", stripped)
    vocative = re.match(r"^(?:(?i:hey|hi|hello|oh|wow|thanks|thank you|aw+)\s+)?([A-Z][a-z]+)\s*[,，!！]\s*", stripped)
    if vocative and any(name.startswith(vocative.group(1)) for name in participants):
        stripped = stripped[vocative.end() :]
    if len(stripped) >= 3:
        text = stripped
    text = text.strip(" -–—*•")
    # A quotation spanning several sentences leaves a stray mark on its first and last sentence. A
    # '"' that closes a “ (Chinese wiki text mixes them: 选为“诗人王子") is not stray.
    if text.count('"') % 2 and (text.count('"') + text.count("“") + text.count("”")) % 2:
        text = text[1:] if text.startswith('"') else text[:-1] if text.endswith('"') else text.replace('"', "", 1)
    return text.strip()


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:] if text[:1].islower() else text


def _informative(c: _Candidate, conversation: bool, topic_hint: str) -> bool:
    """Drop what is not a fact: questions, headings, page furniture, small talk."""
    original = c.original.strip()
    if c.is_row:
        return len(c.tokens) >= 1
    if not original or _BOILERPLATE.match(original) or _QUESTION.search(original):
        return False
    if original.strip(" .:：") == topic_hint.strip() or original.strip(" .:：") == _topic_label(topic_hint):
        return False
    if conversation and _SIGN_OFF.match(original):
        return False
    cjk = is_cjk_text(original)
    if not conversation and not _TERMINAL.search(original) and _looks_like_heading(original, cjk):
        return False
    meaningful = [t for t in c.tokens if t not in salience.CHAT_FILLER] if conversation else c.tokens
    if cjk:
        return len(original) >= 6 and len(meaningful) >= 2
    return len(original.split()) >= 3 and len(meaningful) >= 2


def _looks_like_heading(text: str, cjk: bool) -> bool:
    if cjk:
        return len(text) <= 10
    tokens = text.split()
    capitalised = sum(1 for w in tokens if w[:1].isupper() or not w[:1].isalpha())
    return len(tokens) <= 8 and capitalised >= 0.6 * len(tokens)


def _deduplicated(candidates: list[_Candidate]) -> list[_Candidate]:
    by_key: dict[str, _Candidate] = {}
    for c in candidates:
        key = re.sub(r"[\W_]+", " ", c.text.lower()).strip()
        if key in by_key:
            by_key[key].source_ids = list(dict.fromkeys(by_key[key].source_ids + c.source_ids))
        else:
            by_key[key] = c
    return list(by_key.values())


def _capped_by_role(candidates: list[_Candidate], limit: int, assistants: set[str],
                    per_turn: int | None = None) -> list[_Candidate]:
    """The people's statements first, then at most `per_turn` of each assistant reply, within `limit`, in source order.

    What a user says about themselves is the memory; an assistant's reply is context for it.
    """
    per_turn = ASSISTANT_FACTS_PER_TURN if per_turn is None else per_turn
    information = _information(candidates)
    people = [c for c in candidates if c.speaker not in assistants]
    replies: dict[str, list[_Candidate]] = {}
    for c in candidates:
        if c.speaker in assistants:
            replies.setdefault(c.turn, []).append(c)
    chosen = sorted(people, key=information, reverse=True)[:limit]
    kept_replies = [c for turn in replies.values() for c in sorted(turn, key=information, reverse=True)[:per_turn]]
    chosen += sorted(kept_replies, key=information, reverse=True)[: max(0, limit - len(chosen))]
    return sorted(chosen, key=lambda c: c.position)


def _information(candidates: list[_Candidate]):
    df = Counter(t for c in candidates for t in set(c.tokens))
    scale = math.log(len(candidates) + 1)

    def information(c: _Candidate) -> float:
        unique = set(c.tokens)
        novelty = sum(math.log((len(candidates) + 1) / df[t]) for t in unique) / (len(unique) * scale) if unique else 0
        return len(unique) ** 0.5 * (0.5 + novelty)

    return information


def _capped(candidates: list[_Candidate], limit: int) -> list[_Candidate]:
    """The `limit` most informative candidates, in source order.

    Informative means many distinct words that the rest of the unit does not repeat (inverse
    document frequency inside the unit), so forty near-identical log lines do not push out the one
    sentence that says something else.
    """
    if len(candidates) <= limit:
        return candidates
    ranked = sorted(candidates, key=_information(candidates), reverse=True)
    return sorted(ranked[:limit], key=lambda c: c.position)


def _pick_for_summary(candidates: list[_Candidate], budget: int, zh: bool) -> list[_Candidate]:
    """The most central sentences that fit the budget, skipping near-duplicates of ones already chosen."""
    chosen: list[_Candidate] = []
    used = 0
    # A sentence longer than half the budget would crowd the others out, so it ranks lower.
    ranked = sorted(candidates, key=lambda c: c.score * min(1.0, budget / 2 / max(1, _size(c.text, zh))), reverse=True)
    for c in ranked:
        size = _size(c.text, zh)
        if chosen and used + size > budget:
            continue
        if any(_overlap(c.tokens, other.tokens) > 0.6 for other in chosen):
            continue
        chosen.append(c)
        used += size
        if len(chosen) == SUMMARY_SENTENCES:
            break
    return sorted(chosen, key=lambda c: c.position)


def _document_summary(candidates: list[_Candidate], passages: list[Passage], zh: bool) -> str:
    budget = SUMMARY_CHARS if zh else SUMMARY_WORDS
    prose = [c for c in candidates if not c.is_row] or candidates
    if not prose:
        return _trimmed(" ".join(p.text.strip() for p in passages), budget, zh)
    # The summary repeats the original sentence: the "[Topic]" prefix only helps a fact read alone.
    picked = _pick_for_summary(prose, budget, zh)
    return _trimmed(_joined([_ended(_unprefixed(c.text), zh) for c in picked], zh), budget, zh)


def _conversation_summary(
    candidates: list[_Candidate], participants: list[str], topic_words: list[str], passages: list[Passage], zh: bool
) -> str:
    budget = SUMMARY_CHARS if zh else SUMMARY_WORDS
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
    picked = _pick_for_summary(candidates, budget - _size(intro, zh), zh)
    return _trimmed(_joined([intro, *(_ended(c.text, zh) for c in picked)], zh), budget, zh)


def _conversation_topic(participants: list[str], topic_words: list[str], zh: bool) -> str:
    who = ("和" if zh else " and ").join(participants[:3])
    if not topic_words:
        return who
    return f"{who}：{'、'.join(topic_words)}" if zh else f"{who}: {', '.join(topic_words)}"


def _episode_time(unit: ExtractionUnit, passages: list[Passage]) -> datetime | None:
    stamps = [p.timestamp for p in passages if p.timestamp]
    return min(stamps) if stamps else unit.reference_time


def _as_datetime(resolved, reference: datetime | None) -> datetime | None:
    if resolved is None:
        return None
    tz = reference.tzinfo if isinstance(reference, datetime) else None
    return datetime.combine(resolved.start, time.min, tzinfo=tz)


def _unprefixed(text: str) -> str:
    return re.sub(r"^\[[^\]]*\] ", "", text)


def _ended(text: str, zh: bool) -> str:
    return text if _TERMINAL.search(text) else text + ("。" if zh else ".")


def _size(text: str, zh: bool) -> int:
    return len(text) if zh else len(text.split())


def _overlap(a: list[str], b: list[str]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / max(1, min(len(sa), len(sb)))


def _joined(parts: list[str], zh: bool) -> str:
    out = ""
    for part in (p.strip() for p in parts if p.strip()):
        # Chinese sentences join without a space, anything next to Latin text with one.
        tight = zh and (has_cjk(out[-1:] + part[:1]) or "\u3000" <= out[-1:] <= "\u303f" or "\uff00" <= out[-1:])
        out += part if not out or tight else " " + part
    return out


def _trimmed(text: str, budget: int, zh: bool) -> str:
    if zh:
        return text if len(text) <= budget else text[: budget - 1].rstrip("，,、 ") + "…"
    tokens = text.split()
    return text if len(tokens) <= budget else " ".join(tokens[:budget]).rstrip(",;: ") + "…"
