"""MemCell segmentation: hard limits first, then topic boundaries, as in EverCore.

A window of accumulated turns is cut in three steps:

1. **Forced split.** A window longer than MAX_WINDOW_TOKENS (counted with `extraction.tokens.count_tokens`
   over the formatted lines) or MAX_WINDOW_MESSAGES is cut at the longest prefix that fits, found by
   binary search over the prefix token sums. The prefix is complete: nothing later can join it.
2. **Boundary detection** over each window by a detector (`conversations.boundaries`): an
   LLM reading the formatted window, or the deterministic time-gap / topic-shift detector.
3. **Packing.** Every segment but the last is complete. The last one stays pending (more turns may
   continue it) unless the flush is final, the detector says not to wait, or a limit closed it.
"""

import bisect
import itertools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from extraction.tokens import count_tokens

# EverCore's hard limits for one MemCell window: 64 Ki tokens (what a long-context extraction
# prompt still holds comfortably) and 500 messages.
MAX_WINDOW_TOKENS = 65_536
MAX_WINDOW_MESSAGES = 500


@dataclass
class Turn:
    """One chat message as segmentation and extraction see it."""

    message_id: str
    sender: str
    text: str
    timestamp: datetime
    session_id: str = ""
    role: str = ""  # "assistant" for an AI assistant's reply (posted with role), else the people's
    _tokens: int | None = field(default=None, repr=False, compare=False)

    @property
    def tokens(self) -> int:
        if self._tokens is None:
            self._tokens = count_tokens(format_turn(0, self))
        return self._tokens

    @property
    def line(self) -> str:
        """What an embedding of the turn sees: who said it and what, without the clock."""
        return f"{self.sender}: {self.text}" if self.sender else self.text


@dataclass
class BoundaryDecision:
    starts: list[int]  # 0-based indices of the turns that open a new segment (never 0)
    should_wait: bool = True  # the last segment may still continue
    mode: str = ""  # the detector that decided, when it differs from the one asked (a fallback)


class BoundaryDetector(Protocol):
    mode: str  # "llm" or "deterministic"

    def detect(self, turns: list[Turn]) -> BoundaryDecision: ...


@dataclass
class Segmentation:
    segments: list[list[Turn]]  # complete MemCells, in order
    pending: list[Turn]  # the tail that waits for more turns (empty after a final flush)
    forced: int = 0  # segments closed by a hard limit
    modes: set[str] = field(default_factory=set)  # which detectors decided


def format_turn(number: int, turn: Turn) -> str:
    """`[N] [timestamp] sender: text`, the line the LLM boundary prompt numbers."""
    stamp = turn.timestamp.isoformat(timespec="seconds") if turn.timestamp else "?"
    return f"[{number}] [{stamp}] {turn.line}"


def format_window(turns: list[Turn]) -> str:
    return "\n".join(format_turn(i, t) for i, t in enumerate(turns, start=1))


def forced_split_point(token_counts: list[int], *, max_tokens: int = MAX_WINDOW_TOKENS,
                       max_messages: int = MAX_WINDOW_MESSAGES) -> int | None:
    """How many leading turns form a forced MemCell, or None when the whole window fits the limits.

    Binary search (bisect) over the prefix token sums finds the longest prefix within `max_tokens`;
    a single turn longer than the limit still forms a segment of its own, so the cut is at least 1.
    """
    if len(token_counts) <= max_messages and sum(token_counts) <= max_tokens:
        return None
    prefix = list(itertools.accumulate(token_counts))
    fits = bisect.bisect_right(prefix, max_tokens)
    return max(1, min(fits, max_messages))


def split_at(turns: list[Turn], starts: list[int]) -> list[list[Turn]]:
    cuts = sorted({s for s in starts if 0 < s < len(turns)})
    bounds = [0, *cuts, len(turns)]
    return [turns[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def segment_turns(turns: list[Turn], detector: BoundaryDetector, *, final: bool,
                  max_tokens: int | None = None, max_messages: int | None = None) -> Segmentation:
    """Cut accumulated turns into complete MemCells and a pending tail (empty when `final`)."""
    # Read at call time, so a deployment (or a test) can lower the module limits.
    max_tokens = max_tokens or MAX_WINDOW_TOKENS
    max_messages = max_messages or MAX_WINDOW_MESSAGES
    result = Segmentation(segments=[], pending=[])
    rest = list(turns)
    while rest:
        cut = forced_split_point([t.tokens for t in rest], max_tokens=max_tokens, max_messages=max_messages)
        window, rest = (rest[:cut], rest[cut:]) if cut else (rest, [])
        decision = detector.detect(window) if len(window) > 1 else BoundaryDecision([], should_wait=True)
        result.modes.add(decision.mode or detector.mode)
        pieces = split_at(window, decision.starts)
        if cut:  # the limit closed this window: all of it is complete
            result.segments.extend(pieces)
            result.forced += 1
        elif final or not decision.should_wait:
            result.segments.extend(pieces)
        else:
            result.segments.extend(pieces[:-1])
            result.pending = pieces[-1]
    return result
