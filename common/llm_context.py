"""The context guard: a prompt cut to the model's window before it is sent, and a server's
"context length exceeded" told apart from its other 400s.

Tokens are estimated, not counted: the model's tokenizer is unknown here (any OpenAI-compatible
server), and tiktoken lives in extraction, above this layer. The estimate is on the high side —
a token per 4 ASCII characters (English runs about 4.5), one per other character (a CJK character is
1–1.5 tokens under cl100k) — so a prompt cut to it fits.
"""

import re

CUT_MARK = "\n[… cut to fit the model's context window …]\n"
# What servers say when a prompt and max_tokens do not fit: OpenAI ("context_length_exceeded",
# "maximum context length is N tokens"), vLLM (the same words), llama.cpp ("exceeds the available
# context size"), Anthropic-style proxies ("prompt is too long"), TGI ("must have less than N tokens").
_OVERFLOW = re.compile(
    r"context[_ ]length|context (?:size|window)|maximum context|prompt is too long|too many tokens"
    r"|input (?:is )?too long|must have less than \d+ tokens|reduce the length", re.I)


def estimate_tokens(text: str) -> int:
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


def fit_messages(messages: list[dict], budget: int) -> list[dict]:
    """`messages` with the longest one's middle cut until the estimate fits `budget` tokens.

    The middle goes because prompts put instructions first and the reply's shape last ("Answer in
    JSON: …"), with the material between them; a copy is returned, the caller's list is untouched.
    """
    total = sum(estimate_tokens(m.get("content") or "") for m in messages)
    if total <= budget:
        return messages
    out = [dict(m) for m in messages]
    longest = max(range(len(out)), key=lambda i: len(out[i].get("content") or ""))
    text = out[longest]["content"]
    others = total - estimate_tokens(text)
    room = max(0, budget - others - estimate_tokens(CUT_MARK))
    head, tail = _ends_within(text, room)
    out[longest]["content"] = text[:head] + CUT_MARK + text[len(text) - tail:]
    return out


def _ends_within(text: str, room: int) -> tuple[int, int]:
    """Characters kept at the start and at the end: three quarters of `room` tokens for the start."""
    head = _prefix_within(text, room * 3 // 4)
    tail = _prefix_within(text[head:][::-1], room - estimate_tokens(text[:head]))
    return head, tail


def _prefix_within(text: str, tokens: int) -> int:
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix whose estimate fits (the estimate grows with the prefix)
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo


def is_overflow(message: str) -> bool:
    """Whether a server's refusal says the prompt (with max_tokens) exceeds the model's context."""
    return bool(_OVERFLOW.search(message or ""))
