"""Agent cases written by the LLM, when one is configured: the same Case as the rules', read strictly.

Whether a MemCell is a case stays the rules' decision (a person's request and a tool call or result:
agent_cases.extract_case), so a chat without tools costs no call. The model then writes what the
phrase lists read coarsely: the task as the person meant it, the approach as ordered steps, the
outcome, and the evidence of success or failure, in any language. Its reply is asked for with a JSON
Schema where the server takes one (case_schema), a wrong shape sends the rules' case, and it is read
strictly: messages are cited by their number in the prompt (a reply cannot cite a message the MemCell did not
hand it), evidence kinds are the rules' (so the quality is the same function of the evidence,
agent_cases.score, and feedback and skills' maturity mean the same in either mode), a tool name must
be one the messages called, and text is cut to the rules' lengths. The tools and cited messages stay
the rules' (clustering compares tools). Any failure returns None and the caller keeps the rules' case.
"""

import json
import logging
import re

from django.conf import settings

from conversations.agent_cases import (
    MAX_STEP_CHARS,
    MAX_STEPS,
    MAX_TASK_CHARS,
    WEIGHTS,
    Case,
    Step,
    extract_case,
    label,
    role_of,
    score,
)
from memory.models import Message

log = logging.getLogger(__name__)

MAX_PROMPT_MESSAGES = 40  # a MemCell holds a few dozen turns at most; the rest are not shown
MAX_MESSAGE_CHARS = 600  # a tool result can be a page of output; its head says ok or error
MAX_EVIDENCE = 12
EVIDENCE_KINDS = tuple(k for k in WEIGHTS if not k.startswith("feedback_"))  # feedback comes from the API only

CASE_PROMPT = """\
You record what an AI agent did about a task, from one stretch of conversation: a person's request,
the agent's turns, its tool calls and the tools' results, numbered [1], [2], ... with their role.
Reply with one JSON object and nothing else:
{"task": str, "steps": [{"text": str, "tool": str, "messages": [int, ...], "error": str}],
 "outcome": str, "evidence": [{"kind": str, "message": int, "text": str}]}
task: what the person asked for, in one sentence, in their language.
steps: the agent's approach in order (at most 12): each a short imperative ("Run the date tests"),
  tool: the tool it called ("" for a step without a tool), messages: the numbers it comes from,
  error: what went wrong in that step ("" when nothing did).
outcome: how it ended, in one sentence.
evidence: what shows success or failure, each citing one message: kind is one of
  agent_reported_success, agent_reported_failure (the agent's own report), tool_error (a tool result
  that failed), recovered (a later call of a failed tool that succeeded), user_positive,
  user_negative (the person's reaction). List only what the messages show.
"""


def plan_case(messages: list[Message]) -> Case | None:
    """The MemCell's agent case, or None: the rules decide whether it is one; the model, when one is
    configured, writes it (the rules' case when the model fails). Runs outside any transaction."""
    case = extract_case(messages)
    if case is None or not settings.LLM_ENABLED:
        return case
    return llm_case(messages, case) or case


def check_case_reply(obj: dict) -> None:
    """The reply's shape: every field present and of its type, or ValueError (complete_json retries it,
    then the rules' case stands). What a well-typed reply gets wrong in content (a message number the
    MemCell lacks, a tool it never called, a kind the rules do not know) is dropped later, item by item.
    A wrong type is no such slip: `"message": "3"` would drop every piece of evidence and leave the case
    a neutral quality its messages do not show."""
    for key, kind in (("task", str), ("steps", list), ("outcome", str), ("evidence", list)):
        if not isinstance(obj.get(key), kind):
            raise ValueError(f'"{key}" must be a {"string" if kind is str else "list"}')
    if not obj["task"].strip():
        raise ValueError('"task" must not be empty')
    if not obj["steps"]:
        raise ValueError('"steps" must list at least one step')
    for i, step in enumerate(obj["steps"]):
        if not isinstance(step, dict) or not isinstance(step.get("text"), str) or not step["text"].strip():
            raise ValueError(f'steps[{i}] must be an object with a non-empty string "text"')
        for key in ("tool", "error"):
            if not isinstance(step.get(key, ""), str):
                raise ValueError(f"steps[{i}].{key} must be a string")
        numbers = step.get("messages", [])
        if not isinstance(numbers, list) or not all(_is_number(n) for n in numbers):
            raise ValueError(f"steps[{i}].messages must be a list of message numbers")
    for i, item in enumerate(obj["evidence"]):
        if not isinstance(item, dict) or not isinstance(item.get("kind"), str) or not _is_number(item.get("message")):
            raise ValueError(f'evidence[{i}] must be an object with a string "kind" and a message number "message"')
        if not isinstance(item.get("text", ""), str):
            raise ValueError(f"evidence[{i}].text must be a string")


def _is_number(value) -> bool:
    return type(value) is int  # not bool, not 3.0, not "3"


def case_schema(count: int, tools: list[str]) -> dict:
    """What check_case_reply accepts, as a JSON Schema (common/llm_formats.py), narrowed to what the
    MemCell can back: message numbers 1..count, the tools its messages called, the rules' evidence
    kinds, lists bounded. No maxLength: llama.cpp's grammar fails on it (extraction/llm.py)."""
    number = {"enum": list(range(1, max(count, 1) + 1))}
    step = {"type": "object", "additionalProperties": False, "required": ["text", "tool", "messages", "error"],
            "properties": {"text": {"type": "string", "minLength": 1}, "tool": {"enum": ["", *tools]},
                           "messages": {"type": "array", "maxItems": max(count, 1), "items": number},
                           "error": {"type": "string"}}}
    evidence = {"type": "object", "additionalProperties": False, "required": ["kind", "message", "text"],
                "properties": {"kind": {"enum": list(EVIDENCE_KINDS)}, "message": number, "text": {"type": "string"}}}
    return {"type": "object", "additionalProperties": False, "required": ["task", "steps", "outcome", "evidence"],
            "properties": {"task": {"type": "string", "minLength": 1},
                           "steps": {"type": "array", "minItems": 1, "maxItems": MAX_STEPS, "items": step},
                           "outcome": {"type": "string"},
                           "evidence": {"type": "array", "maxItems": MAX_EVIDENCE, "items": evidence}}}


def case_prompt(messages: list[Message]) -> list[dict]:
    lines = []
    for n, m in enumerate(messages[:MAX_PROMPT_MESSAGES], start=1):
        who = _clean(m.sender_name or m.sender_id or "", 60)
        lines.append(f"[{n}] ({role_of(m) or 'user'}{': ' + who if who else ''}) {_clean(m.content, MAX_MESSAGE_CHARS)}")
    return [{"role": "system", "content": CASE_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


def llm_case(messages: list[Message], rules: Case) -> Case | None:
    """The model's case for a MemCell the rules found to be one; None when the model failed."""
    from common.llm import LlmError, complete_json  # noqa: PLC0415 - keeps the openai import off the default path

    try:
        reply = complete_json(case_prompt(messages), schema_check=check_case_reply, step="agent_case",
                              schema=case_schema(len(messages[:MAX_PROMPT_MESSAGES]), rules.tools))
    except LlmError as exc:
        log.warning("LLM agent case failed, this MemCell's case comes from the rules: %s", exc)
        return None
    return case_from_reply(reply, messages, rules)


def case_from_reply(reply: dict, messages: list[Message], rules: Case) -> Case:
    shown = messages[:MAX_PROMPT_MESSAGES]

    def cited(numbers) -> list[str]:
        numbers = numbers if isinstance(numbers, list) else [numbers]
        return list(dict.fromkeys(shown[n - 1].message_id for n in numbers if type(n) is int and 1 <= n <= len(shown)))

    steps = []
    for raw in reply.get("steps", [])[:MAX_STEPS]:
        text = _clean(raw["text"], MAX_STEP_CHARS)
        tool = raw.get("tool") if raw.get("tool") in rules.tools else ""
        error = _clean(raw.get("error") if isinstance(raw.get("error"), str) else "", 80)
        if text:
            steps.append(Step(text, cited(raw.get("messages", [])), tool=tool, error=error))
    evidence = []
    for raw in reply.get("evidence", [])[:MAX_EVIDENCE]:
        where = cited(raw.get("message"))
        if raw.get("kind") in EVIDENCE_KINDS and where:
            evidence.append({"kind": raw["kind"], "message_id": where[0],
                             "text": _clean(raw.get("text") if isinstance(raw.get("text"), str) else "", 120)})
    quality = score(evidence)
    return Case(task=_clean(reply["task"], MAX_TASK_CHARS) or rules.task, steps=steps or rules.steps,
                outcome=_clean(reply["outcome"], MAX_TASK_CHARS) or rules.outcome, quality=quality,
                label=label(quality), evidence=evidence, tools=rules.tools, message_ids=rules.message_ids, mode="llm")


_CONTROL = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def _clean(text, limit: int) -> str:
    """One line of at most `limit` characters, without control characters (PostgreSQL text holds no NUL)."""
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False)
    return " ".join(_CONTROL.sub(" ", text).split())[:limit].rstrip()
