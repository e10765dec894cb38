"""What one unit of LLM work may spend, and whose it is: one flush, one agentic search, one document.

`with llm_scope(seconds=..., tenant_id=...)` around the unit; every `complete_json` inside reads it:
past the deadline a call is not sent (its step falls back to the rules), a call under way gets only
the time left, and its tokens are counted to the tenant. Without this a MemCell's up to six serial
calls each had LLM_TIMEOUT × attempts of its own: 13–25 minutes against a hung endpoint (issue 37).

A context variable, so a scope belongs to the thread (or task) that opened it; a nested scope keeps
the nearer of the two deadlines and the outer tenant unless it names one. Kept free of the openai
import, so the apps open scopes on their default path.
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class LlmScope:
    deadline: float | None = None  # time.monotonic() past which no call is sent
    tenant_id: int | None = None


_current: ContextVar[LlmScope] = ContextVar("llm_scope", default=LlmScope())


@contextmanager
def llm_scope(*, seconds: float | None = None, tenant_id: int | None = None) -> Iterator[LlmScope]:
    outer = _current.get()
    deadline = outer.deadline
    if seconds is not None and seconds > 0:
        mine = time.monotonic() + seconds
        deadline = mine if deadline is None else min(deadline, mine)
    scope = LlmScope(deadline, outer.tenant_id if tenant_id is None else tenant_id)
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def current() -> LlmScope:
    return _current.get()


def seconds_left() -> float | None:
    """Seconds until the current scope's deadline (negative once past), or None without one."""
    deadline = _current.get().deadline
    return None if deadline is None else deadline - time.monotonic()
