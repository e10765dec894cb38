"""Agent cases: what an agent did about a task, read from a MemCell of a conversation with tool calls.

A MemCell is an agent case when it holds a request from a person and at least one tool call or tool
result: a message with role `tool` or `function` (its sender names the tool), a `tool_call` message,
or an assistant message whose content is an OpenAI-style function call (`{"tool_calls": [...]}`,
`{"function_call": {...}}` or `{"name": ..., "arguments": ...}`). The case holds:

- task: the first request of a person in the MemCell (its first sentences);
- steps: in order, the agent's stated actions (the first sentence of each of its prose turns before
  the last) and its tool calls, each call with what its result said (ok, or the error);
- outcome: the agent's last prose turn (its first sentences);
- quality in [0, 1] with the evidence it rests on: what the agent reported (success or failure
  phrases in its last turn), errors in tool results (and a recovery when a later call of the same
  tool succeeded), and the person's feedback after the request (thanks / "still broken").

Deterministic: phrase lists in English and Chinese, no model. With an LLM configured, the model writes
the task, steps, outcome and evidence of a MemCell these rules found to be a case
(agent_cases_llm.py; plan_case); the quality is the same function of the evidence either way. A
task spread over two MemCells yields two cases; a MemCell with two tasks yields one case (the first
request).
"""

import json
import re
from dataclasses import dataclass, field

from memory.ids import memory_uuid
from memory.models import Memory, Message

TOOL_ROLES = {"tool", "function", "tool_result", "observation"}
CALL_ROLES = {"tool_call", "function_call", "action"}
AGENT_ROLES = {"assistant", "agent", "ai", "bot", "system"}
MAX_TASK_CHARS = 300
MAX_STEP_CHARS = 160
MAX_STEPS = 12

SUCCESS_LABEL, FAILURE_LABEL, MIXED_LABEL = "success", "failure", "mixed"
SUCCESS_AT, FAILURE_AT = 0.65, 0.35  # quality at or above / at or below which the outcome is labelled so

_FAILURE = re.compile(
    r"\b(could ?n[o']t|can ?n[o']t|unable to|failed|fails|failing|was not able|wasn't able|did ?n[o']t work|"
    r"no availability|not available|sold out|no results?|gave up|not possible|timed out|still (?:fail|broken|red))\b"
    r"|失败|无法|没能|未能|没有找到|找不到|不可用|已满|超时|放弃", re.I)
_SUCCESS = re.compile(
    r"\b(done|fixed|booked|reserved|completed?|resolved|succeeded|successfully|passes|passing|all tests pass|"
    r"confirmed|found|here (?:is|are)|merged|deployed|sent|scheduled|works now|is ready)\b"
    r"|已完成|完成了|成功|已修复|修复了|已预订|订好|预订了|找到了|已发送|已安排|已确认|搞定", re.I)
_TOOL_ERROR = re.compile(
    r"\b(error|exception|traceback|failed|failure|denied|invalid|not found|timeout|timed out|unavailable|"
    r"status[\"' :=]+[45]\d\d|http [45]\d\d)\b|错误|异常|失败|超时|无效|拒绝", re.I)
_USER_POSITIVE = re.compile(
    r"\b(thanks|thank you|great|perfect|awesome|works|worked|nice|excellent|exactly|good job|looks good)\b"
    r"|谢谢|多谢|太好了|可以了|完美|好的|没问题|很好|正是", re.I)
_USER_NEGATIVE = re.compile(
    r"\b(does ?n[o']t work|did ?n[o']t work|still (?:fails?|broken|wrong|red|the same)|wrong|not what i|"
    r"that's not|that is not|useless|broke|worse)\b|不对|不行|还是不|错了|没用|不是我要|更糟", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")  # "128.4" is one number, "。" needs no space


@dataclass
class Step:
    text: str
    message_ids: list[str]
    tool: str = ""
    error: str = ""


@dataclass
class Case:
    task: str
    steps: list[Step]
    outcome: str
    quality: float
    label: str
    evidence: list[dict] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    message_ids: list[str] = field(default_factory=list)
    mode: str = "deterministic"  # "llm" when the model wrote it (agent_cases_llm)

    def text(self) -> str:
        """The case as one searchable statement: the task leads, as questions name it."""
        steps = "; ".join(f"{i}. {s.text}" for i, s in enumerate(self.steps, 1))
        return (f"Agent case: {self.task} | Approach: {steps or 'no recorded steps'} | "
                f"Outcome ({self.label}, quality {self.quality:.2f}): {self.outcome or 'not stated'}")

    def metadata(self) -> dict:
        return {"task": self.task, "steps": [{"text": s.text, "message_ids": s.message_ids, "tool": s.tool,
                                              "error": s.error} for s in self.steps],
                "outcome": self.outcome, "outcome_label": self.label, "quality": self.quality,
                "evidence": self.evidence, "tools": self.tools}


def role_of(message: Message) -> str:
    return (message.role or "").strip().lower()


def function_call(content: str) -> tuple[str, str] | None:
    """(tool name, arguments as text) of an OpenAI-style function-call message, else None."""
    text = content.strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    calls = data.get("tool_calls")
    if isinstance(calls, list) and calls and isinstance(calls[0], dict):
        data = calls[0].get("function") or calls[0]
    elif isinstance(data.get("function_call"), dict):
        data = data["function_call"]
    name, arguments = data.get("name"), data.get("arguments", "")
    if not isinstance(name, str) or not name:
        return None
    return name[:80], arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def is_tool_message(message: Message) -> bool:
    role = role_of(message)
    return role in TOOL_ROLES or role in CALL_ROLES or (role in AGENT_ROLES and function_call(message.content) is not None)


def is_person(message: Message) -> bool:
    role = role_of(message)
    return role not in TOOL_ROLES | CALL_ROLES | AGENT_ROLES


def first_sentences(text: str, limit: int) -> str:
    text = " ".join(text.split())
    out = ""
    for sentence in _SENTENCE.split(text):
        if not sentence:
            continue
        if out and len(out) + len(sentence) + 1 > limit:
            break
        out = f"{out} {sentence}".strip()
    return out[:limit].rstrip()


def extract_case(messages: list[Message]) -> Case | None:
    """The agent case of a MemCell's messages (in order), or None when it is not one."""
    if not any(is_tool_message(m) for m in messages):
        return None
    request_at = next((i for i, m in enumerate(messages) if is_person(m) and m.content.strip()), None)
    if request_at is None:
        return None
    request = messages[request_at]
    task = first_sentences(request.content, MAX_TASK_CHARS)
    after = messages[request_at + 1:]
    prose = [m for m in after if role_of(m) in AGENT_ROLES and function_call(m.content) is None]
    final = prose[-1] if prose else None
    steps, evidence, tools = [], [], []
    open_calls: dict[str, Step] = {}
    failed_tools: dict[str, dict] = {}
    for m in after:
        role = role_of(m)
        call = function_call(m.content) if role in AGENT_ROLES | CALL_ROLES else None
        if role in CALL_ROLES and call is None:
            call = (m.sender_name or m.sender_id or "tool")[:80], m.content
        if call is not None:
            name, arguments = call
            step = Step(f"{name}({first_sentences(arguments, 60)})", [m.message_id], tool=name)
            steps.append(step)
            open_calls[name] = step
            tools.append(name)
        elif role in TOOL_ROLES:
            name = (m.sender_name or m.sender_id or (function_call(m.content) or ("tool",))[0])[:80]
            error = _TOOL_ERROR.search(m.content)
            summary = first_sentences(m.content, 80)
            step = open_calls.pop(name, None) or (open_calls.pop(next(iter(open_calls)), None) if open_calls else None)
            if step is None:
                step = Step(name, [], tool=name)
                steps.append(step)
                tools.append(name)
            step.message_ids.append(m.message_id)
            if error:
                step.error = summary
                step.text = f"{step.text} -> error: {summary}"[:MAX_STEP_CHARS]
                failed_tools[step.tool] = {"kind": "tool_error", "message_id": m.message_id, "tool": step.tool,
                                           "text": summary}
                evidence.append(failed_tools[step.tool])
            else:
                step.text = f"{step.text} -> ok"[:MAX_STEP_CHARS]
                if step.tool in failed_tools:
                    evidence.append({"kind": "recovered", "message_id": m.message_id, "tool": step.tool,
                                     "text": f"{step.tool} succeeded after an error"})
                    failed_tools.pop(step.tool)
        elif role in AGENT_ROLES and m is not final and m.content.strip():
            steps.append(Step(first_sentences(m.content, MAX_STEP_CHARS), [m.message_id]))
    outcome = first_sentences(final.content, MAX_TASK_CHARS) if final else ""
    if final is not None:
        if _FAILURE.search(final.content):
            evidence.append({"kind": "agent_reported_failure", "message_id": final.message_id, "text": outcome})
        elif _SUCCESS.search(final.content):
            evidence.append({"kind": "agent_reported_success", "message_id": final.message_id, "text": outcome})
    for m in after:
        if is_person(m) and m.content.strip():
            said = first_sentences(m.content, 120)
            if _USER_NEGATIVE.search(m.content):
                evidence.append({"kind": "user_negative", "message_id": m.message_id, "text": said})
            elif _USER_POSITIVE.search(m.content):
                evidence.append({"kind": "user_positive", "message_id": m.message_id, "text": said})
    quality = score(evidence)
    return Case(task=task, steps=steps[:MAX_STEPS], outcome=outcome, quality=quality, label=label(quality),
                evidence=evidence, tools=list(dict.fromkeys(tools)),
                message_ids=[m.message_id for m in messages[request_at:]])


# How much each kind of evidence moves the quality from the neutral 0.5. Tool errors count at most
# three times; a later success of the same tool gives half of one back.
WEIGHTS = {"agent_reported_success": 0.3, "agent_reported_failure": -0.35, "tool_error": -0.1, "recovered": 0.05,
           "user_positive": 0.2, "user_negative": -0.3, "feedback_success": 0.15, "feedback_failure": -0.2}


def score(evidence: list[dict]) -> float:
    total, errors = 0.5, 0
    for item in evidence:
        if item["kind"] == "tool_error":
            errors += 1
            if errors > 3:
                continue
        total += WEIGHTS.get(item["kind"], 0.0)
    return round(min(1.0, max(0.0, total)), 2)


def label(quality: float) -> str:
    if quality >= SUCCESS_AT:
        return SUCCESS_LABEL
    if quality <= FAILURE_AT:
        return FAILURE_LABEL
    return MIXED_LABEL


def case_memory(episode: Memory, case: Case) -> Memory:
    """The unsaved agent_case memory of `case` under `episode` (a fixed id: a re-extraction overwrites)."""
    text = case.text()
    return Memory(
        id=memory_uuid("conv", episode.kb_id, episode.user_id, episode.segment_id, "agent_case"),
        tenant_id=episode.tenant_id, kb_id=episode.kb_id, kind=Memory.Kind.AGENT_CASE, parent=episode, ordinal=0,
        text=text, topic=case.task[:300], source_message_ids=case.message_ids, user_id=episode.user_id,
        session_id=episode.session_id, segment_id=episode.segment_id, occurred_at=episode.occurred_at,
        extraction_mode=case.mode, content_hash=Memory.hash_text(text), metadata=case.metadata(),
        agent_id=episode.agent_id, group_id=episode.group_id, run_id=episode.run_id,
        user_metadata=dict(episode.user_metadata or {}),
    )


def agent_case_memories(episode: Memory, case: Case | None) -> list[Memory]:
    """[the MemCell's agent case memory], or [] when the MemCell is not an agent working on a task."""
    return [case_memory(episode, case)] if case is not None else []
