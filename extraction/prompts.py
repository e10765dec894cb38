"""Prompts for LLM extraction: one episode (topic, summary) and its atomic facts per unit, as JSON."""

from extraction.base import ExtractionUnit, Passage
from extraction.sentences import is_cjk_text

EXTRACTION_SYSTEM_PROMPT = """\
You turn one piece of source material into memory: an episode and its atomic facts.
The material is either a section of a document or a stretch of conversation. Its passages are
numbered [1], [2], ...; conversation passages also carry a timestamp and the speaker's name.

Reply with one JSON object and nothing else:
{"topic": str, "summary": str,
 "facts": [{"text": str, "sources": [int, ...], "occurred_at": "YYYY-MM-DD" or null,
            "entities": [{"name": str, "type": str}, ...]}]}

topic: a short title for what the material is about (a few words; for a document section, the
  section's subject; for a conversation, who talked and about what).
summary: a short narrative of the whole material in the third person, at most about 80 words
  (200 characters for Chinese). For a conversation, start with its date and the participants,
  e.g. "On 2023-05-08, Caroline told Melanie that ...".
facts: every distinct piece of information worth remembering, each one
  - atomic: one statement, one claim; split compound sentences;
  - self-contained: understandable without the passages or the other facts. Use names instead of
    pronouns ("I", "my", "you", "he", "she", "it", "this", "我", "你", "他", "她", "它", "该"); in a
    conversation "I" is the speaker and "you" the person addressed; name what "it" or "this" is;
  - in the third person;
  - with absolute dates: turn relative dates ("yesterday", "last week", "next month", "昨天",
    "上周", "去年") into dates computed from the passage's timestamp or the reference date, and put
    the date the fact happened in occurred_at (null when unknown);
  - faithful: state only what the passages say; no advice, no opinions of your own, no guesses;
  - cited: "sources" lists the numbers of the passages the fact comes from;
  - with its entities: "entities" lists the people, organisations, places, products or works,
    dates and amounts the fact names, each {"name": as written in the fact, "type": one of person,
    organization, place, work, date, amount, other}; [] when it names none.
  Leave out greetings, small talk, questions that carry no information, and page furniture.
  For tables, write one fact per row that names the table's subject and the row's values.

Write topic, summary and facts in the same language as the passages (Chinese for Chinese
material, English for English); keep names, numbers and terms exactly as written.
"""


def passage_line(number: int, passage: Passage) -> str:
    """'[1] [2023-05-08 13:00] Caroline: text' for a chat message, '[1] text' for a document passage."""
    parts = [f"[{number}]"]
    if passage.timestamp:
        parts.append(f"[{passage.timestamp.strftime('%Y-%m-%d %H:%M')}]")
    text = " ".join(passage.text.split()) if passage.speaker else passage.text.strip()
    parts.append(f"{passage.speaker}: {text}" if passage.speaker else text)
    return " ".join(parts)


def extraction_messages(unit: ExtractionUnit, passages: list[Passage]) -> list[dict]:
    """The chat messages asking for one unit's episode and facts."""
    lines = []
    conversation = any(p.speaker for p in passages)
    lines.append(f"Kind: {'conversation' if conversation else 'document section'}")
    if unit.context.get("document"):
        lines.append(f"Document: {unit.context['document']}")
    if unit.topic_hint:
        lines.append(f"Section: {unit.topic_hint}")
    participants = unit.context.get("participants") or list(dict.fromkeys(p.speaker for p in passages if p.speaker))
    if participants:
        lines.append(f"Participants: {', '.join(str(p) for p in participants)}")
    if unit.reference_time:
        lines.append(f"Reference date: {unit.reference_time.strftime('%Y-%m-%d')}")
    if _language(unit, passages) == "zh":
        lines.append("Language: Chinese — write the topic, summary and facts in Chinese.")
    lines.append("")
    lines.append("Passages:")
    lines.extend(passage_line(i, p) for i, p in enumerate(passages, start=1))
    return [
        {"role": "system", "content": EXTRACTION_SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(lines)},
    ]


def _language(unit: ExtractionUnit, passages: list[Passage]) -> str:
    language = (unit.language or "auto").lower()
    if language != "auto":
        return "zh" if language.startswith("zh") else language
    return "zh" if is_cjk_text("".join(p.text for p in passages)) else "en"
