"""Profile items written by the LLM: a bounded prompt (a flush's new facts, numbered, and the current items of the
people they name), a strict reading of the reply, and None on any failure so the caller keeps the rules' items.

The model never names a fact by id: it cites facts by their number in the prompt, so a reply cannot
cite a memory the flush did not hand it (another user's, another tenant's). Items about someone the
facts do not name, in a category Loci does not know, or without a valid citation are dropped;
text is cut to length and stripped of control characters (PostgreSQL text holds no NUL).
"""

import json
import logging
import re
from dataclasses import dataclass

from conversations.profile_rules import RuleItem

log = logging.getLogger(__name__)

CATEGORIES = ("name", "location", "origin", "occupation", "family", "pet", "possession", "preference", "dislike",
              "goal", "interest")
MAX_PROMPT_FACTS = 40  # a MemCell holds a few turns; more facts than this are cut (the rest go by rule)
MAX_PROMPT_ITEMS = 60  # current items shown to the model, newest first
MAX_FACT_CHARS = 400
MAX_REPLY_ITEMS = 40  # a runaway reply must not flood the profile
MAX_VALUE_CHARS = 80
MAX_VALUE_WORDS = 8

PROFILE_PROMPT = """\
You keep user profiles: what is known about each person in a conversation. You get the new facts of
one stretch of conversation, numbered [1], [2], ..., each with the person it is about, and the
profile items already known about those people. List the profile items the new facts state or imply.
Reply with one JSON object and nothing else:
{"items": [{"subject": str, "category": str, "value": str, "kind": "explicit" or "implicit", "facts": [int, ...]}]}
subject: the person the item is about, exactly as the facts name them.
category: one of name, location, origin, occupation, family, pet, possession, preference, dislike, goal,
  interest. location, occupation and name hold one value at a time (the newest wins).
value: a short noun phrase (at most a few words), in the language of the facts ("Sweden", "husband",
  "painting", "上海"). When a new fact restates a known item, use that item's value exactly.
kind: explicit when a fact says it; implicit for a trait or recurring interest the facts imply
  (category interest).
facts: the numbers of the new facts it comes from (at least one).
List nothing the facts do not support. An empty list is a valid answer.
"""


@dataclass(frozen=True)
class ProposedItem:
    item: RuleItem
    kind: str  # "explicit" / "implicit"
    facts: tuple[int, ...]  # indexes into the facts handed to llm_profile_items


def check_profile_reply(obj: dict) -> None:
    """The reply's shape (a wrong shape is retried); items with bad content are dropped later, one by one."""
    items = obj.get("items")
    if not isinstance(items, list):
        raise ValueError('"items" must be a list')
    for i, item in enumerate(items[:MAX_REPLY_ITEMS]):
        if not isinstance(item, dict):
            raise ValueError(f"items[{i}] must be an object")
        for key in ("subject", "category", "value"):
            if not isinstance(item.get(key), str):
                raise ValueError(f'items[{i}].{key} must be a string')
        facts = item.get("facts")
        if not isinstance(facts, list) or not facts or not all(type(n) is int for n in facts):
            raise ValueError(f'items[{i}].facts must be a non-empty list of fact numbers')


def profile_schema(facts: int, subjects: list[str]) -> dict:
    """What check_profile_reply accepts, as a JSON Schema (common/llm_formats.py): SmolLM2 without it
    wrote items whose value or subject was not a string (bench/RESULTS.md, "A real model")."""
    item = {"type": "object", "additionalProperties": False,
            "required": ["subject", "category", "value", "kind", "facts"],
            "properties": {"subject": {"enum": subjects} if subjects else {"type": "string"},
                           "category": {"enum": list(CATEGORIES)}, "value": {"type": "string", "minLength": 1},
                           "kind": {"enum": ["explicit", "implicit"]},
                           "facts": {"type": "array", "minItems": 1, "maxItems": facts,
                                     "items": {"enum": list(range(1, facts + 1))}}}}
    return {"type": "object", "additionalProperties": False, "required": ["items"],
            "properties": {"items": {"type": "array", "maxItems": MAX_REPLY_ITEMS, "items": item}}}


def profile_prompt(facts: list[tuple[str, str]], current: list[dict]) -> list[dict]:
    """facts: (subject, text) of the new facts; current: {subject, category, value} of known items."""
    lines = ["New facts:"]
    lines += [f"[{n}] ({_clean(subject, 80) or 'unknown'}) {_clean(text, MAX_FACT_CHARS)}"
              for n, (subject, text) in enumerate(facts[:MAX_PROMPT_FACTS], start=1)]
    lines.append("Known profile items:")
    lines += [json.dumps({k: i[k] for k in ("subject", "category", "value")}, ensure_ascii=False)
              for i in current[:MAX_PROMPT_ITEMS]] or ["(none)"]
    return [{"role": "system", "content": PROFILE_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


def llm_profile_items(facts: list[tuple[str, str]], current: list[dict]) -> list[ProposedItem] | None:
    """The model's profile items for these new facts; None when the model failed (the caller uses the rules)."""
    from common.llm import LlmError, complete_json  # noqa: PLC0415 - keeps the openai import off the default path

    if not facts:
        return []
    try:
        shown = facts[:MAX_PROMPT_FACTS]
        reply = complete_json(profile_prompt(facts, current), schema_check=check_profile_reply, step="profiles",
                              schema=profile_schema(len(shown), sorted({s for s, _ in shown if s})))
    except LlmError as exc:
        log.warning("LLM profile failed, this flush's profile items come from the rules: %s", exc)
        return None
    return proposed_items(reply, facts)


def proposed_items(reply: dict, facts: list[tuple[str, str]]) -> list[ProposedItem]:
    """The reply's usable items: a known category, a subject the facts name, a value, valid fact numbers."""
    shown = facts[:MAX_PROMPT_FACTS]
    subjects = {s for s, _ in shown if s}
    out, seen = [], set()
    for raw in reply["items"][:MAX_REPLY_ITEMS]:
        category = raw["category"].strip().lower()
        subject = _clean(raw["subject"], 80)
        value = " ".join(_clean(raw["value"], MAX_VALUE_CHARS).split()[:MAX_VALUE_WORDS]).strip(" .,;:!?。，")
        cited = tuple(sorted({n - 1 for n in raw["facts"] if 1 <= n <= len(shown)}))
        if category not in CATEGORIES or subject not in subjects or not value or not cited:
            continue
        # An item is about the person of the facts it cites: a reply cannot pin one person's fact on another.
        cited = tuple(n for n in cited if shown[n][0] == subject)
        if not cited:
            continue
        item = RuleItem(subject, category, value)
        if (subject, category, item.key) in seen or not item.key:
            continue
        seen.add((subject, category, item.key))
        kind = "implicit" if category == "interest" or raw.get("kind") == "implicit" else "explicit"
        out.append(ProposedItem(item, kind, cited))
    return out


_CONTROL = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def _clean(text: str, limit: int) -> str:
    return " ".join(_CONTROL.sub(" ", text or "").split())[:limit]
