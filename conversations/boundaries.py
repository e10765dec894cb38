"""Where one MemCell ends and the next begins: an LLM reading the window, or a deterministic detector.

`boundary_detector()` picks the LLM detector when an LLM is configured; it falls back to the
deterministic one for a window whose replies stay unusable after its retries.
"""

import logging
from datetime import timedelta
from typing import Callable

import numpy as np

from conversations.segmentation import BoundaryDecision, Turn, format_window
from extraction.coreference import asks_something
from extraction.sentences import split_sentences
from retrieval import fitted
from retrieval.embeddings import embedder

log = logging.getLogger(__name__)

# --- deterministic detector constants (tuned with bench/locomo.py on LoCoMo conversation 0)
# A pause this long ends an episode: EverCore's boundary prompt splits after a gap of more than
# four hours, and a change of session always starts a new MemCell.
TIME_GAP = timedelta(hours=4)
# Turns on each side of a gap whose mean embedding is compared (TextTiling's block comparison,
# Hearst 1997): one chat turn is too short to carry a topic, three usually name it.
TOPIC_WINDOW = 3
# A gap whose before/after cosine (multilingual-e5-small, means of TOPIC_WINDOW turns) falls below
# this, at a local minimum, is a topic shift. e5 compresses cosines, so a shift shows as a small dip
# from an already high similarity; the threshold sits at the low tail of in-session gaps
# (see bench/RESULTS.md, "Design notes moved from code comments", TOPIC_THRESHOLD).
TOPIC_THRESHOLD = fitted.TOPIC_THRESHOLD.value  # retrieval/fitted.py: fitted on, date, command
# No topic boundary leaves a segment shorter than this.
MIN_SEGMENT_MESSAGES = 3
# A segment longer than this is cut at its least similar gap (never between a question and its
# answer while another gap will do). While hybrid search returned whole episodes, short MemCells
# won: each hit episode spent one evidence slot per turn. Since facts with their own fusion weights
# fill the results, an episode is mostly the context that ranks its facts, and a longer one carries
# more of it, up to a point
# (see bench/RESULTS.md, "Design notes moved from code comments", MAX_SEGMENT_MESSAGES).
MAX_SEGMENT_MESSAGES = 12
# Words of a turn the topic comparison embeds. A topic is named in a turn's opening words; the rest
# of a 300-word assistant reply only made its embedding cost ~4x a 100-word one (e5 is linear in
# tokens), and on LongMemEval-S those embeddings were ~2/3 of ingestion CPU (bench/RESULTS.md).
# No LoCoMo turn is longer (its longest: 101 words, photo caption included), so chats of people
# are cut exactly as before; 64 words changed one LoCoMo session's MemCells.
TOPIC_WORDS = 112
# An AI assistant's reply (a turn posted with role "assistant") opens on the user's topic ("Here are
# some tips for planning your trip to Speyer…") and spends the rest on advice; its opening words are
# enough for the comparison, and embedding 112 words of every reply was a quarter of LongMemEval-S
# ingestion CPU with the fast embedder (bench/RESULTS.md). No LoCoMo turn has a role.
ASSISTANT_TOPIC_WORDS = 32

# EverCore allows five attempts at a usable boundary reply.
LLM_ATTEMPTS = 5

BOUNDARY_SYSTEM_PROMPT = """You segment a chat log into episodes for a long-term memory system.
An episode is a stretch of conversation about one topic, event or activity that is worth
remembering as one unit. Keep messages together by default. Start a new episode only when:
- the conversation clearly turns to an unrelated topic;
- there is a long pause (several hours, or another day) and the talk after it is about something new;
- a new session begins.
A message that answers, closes or sums up the current topic belongs to that topic's episode."""

BOUNDARY_USER_PROMPT = """Messages, numbered, as `[number] [time] sender: text`:

{window}

Reply with only a JSON object:
{{"boundaries": [numbers of the messages that START a new episode, ascending; 1 is never a boundary],
  "should_wait": true if the last episode may still continue with messages yet to come,
                 false if it has clearly ended}}"""


def boundary_detector():
    """The LLM detector when an LLM is configured, else the deterministic one."""
    from django.conf import settings

    if getattr(settings, "LLM_ENABLED", False):
        return LlmBoundaryDetector()
    return DeterministicBoundaryDetector()


class DeterministicBoundaryDetector:
    """Time gaps and session changes, then embedding topic shifts, within segment length bounds."""

    mode = "deterministic"

    def __init__(self, embed: Callable[[list[str]], np.ndarray] | None = None, *, time_gap: timedelta | None = None,
                 window: int | None = None, threshold: float | None = None, min_segment: int | None = None,
                 max_segment: int | None = None):
        # Defaults are read at call time, so the module constants stay the one place to tune them.
        self._embed = embed
        self.time_gap = time_gap or TIME_GAP
        self.window = window or TOPIC_WINDOW
        self.threshold = TOPIC_THRESHOLD if threshold is None else threshold
        self.min_segment = min_segment or MIN_SEGMENT_MESSAGES
        self.max_segment = max_segment or MAX_SEGMENT_MESSAGES
        if self.min_segment < 1 or self.max_segment < 2 * self.min_segment:
            raise ValueError("need 1 <= min_segment and max_segment >= 2 * min_segment")

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._embed is not None:
            return np.asarray(self._embed(texts), dtype=np.float32)
        return embedder().embed_documents(texts)

    def detect(self, turns: list[Turn]) -> BoundaryDecision:
        hard = [i for i in range(1, len(turns)) if self._hard_break(turns[i - 1], turns[i])]
        blocks = list(zip([0, *hard], [*hard, len(turns)]))
        starts = set(hard)
        if any(b - a > self.min_segment for a, b in blocks):  # only then can a topic boundary exist
            vectors = self.embed([topic_line(t) for t in turns])
            answered = {i for i in range(1, len(turns)) if turns[i].sender != turns[i - 1].sender
                        and asks_something(split_sentences(turns[i - 1].text))}
            for a, b in blocks:
                starts.update(self._topic_starts(vectors, a, b, answered))
        # Without a model of intent the tail can always continue; a final flush packs it anyway.
        return BoundaryDecision(sorted(starts), should_wait=True)

    def _hard_break(self, before: Turn, after: Turn) -> bool:
        if before.session_id != after.session_id:
            return True
        return bool(before.timestamp and after.timestamp and after.timestamp - before.timestamp > self.time_gap)

    def gap_similarities(self, vectors: np.ndarray, a: int, b: int) -> dict[int, float]:
        """Cosine between the mean of up to `window` turns before each gap and after it, inside [a, b)."""
        sims = {}
        for i in range(a + 1, b):
            left = vectors[max(a, i - self.window):i].mean(axis=0)
            right = vectors[i:min(b, i + self.window)].mean(axis=0)
            denominator = float(np.linalg.norm(left) * np.linalg.norm(right)) or 1.0
            sims[i] = float(left @ right) / denominator
        return sims

    def _topic_starts(self, vectors: np.ndarray, a: int, b: int, answered: set[int] = frozenset()) -> set[int]:
        """Topic boundaries inside [a, b); `answered` gaps (a question, then its answer) are cut last."""
        sims = self.gap_similarities(vectors, a, b)
        chosen: set[int] = set()

        def allowed(i: int, lo: int, hi: int) -> bool:
            edges = [lo, hi, *chosen]
            return all(abs(i - e) >= self.min_segment for e in edges)

        # Local minima below the threshold, deepest first, each keeping every segment >= min_segment.
        minima = [i for i, s in sims.items() if s < self.threshold
                  and s <= sims.get(i - 1, 1.0) and s <= sims.get(i + 1, 1.0)]
        for i in sorted(minima, key=sims.get):
            if allowed(i, a, b):
                chosen.add(i)
        # Then cut over-long segments at their least similar admissible gap, until none is left.
        bounds = sorted({a, b, *chosen})
        queue = list(zip(bounds, bounds[1:]))
        while queue:
            lo, hi = queue.pop()
            if hi - lo <= self.max_segment:
                continue
            inside = [i for i in range(lo + self.min_segment, hi - self.min_segment + 1)]
            # A cut between a question and its answer strands both: the answer's fact needs the question.
            cut = min(inside, key=lambda i: (i in answered, sims.get(i, 1.0)))
            chosen.add(cut)
            queue += [(lo, cut), (cut, hi)]
        return chosen


def topic_line(turn: Turn) -> str:
    """The turn's line as the topic comparison embeds it: its first TOPIC_WORDS words (ASSISTANT_TOPIC_WORDS
    of an assistant's reply)."""
    words = turn.line.split()
    limit = ASSISTANT_TOPIC_WORDS if turn.role == "assistant" else TOPIC_WORDS
    return turn.line if len(words) <= limit else " ".join(words[:limit])


class LlmBoundaryDetector:
    """Asks the chat model for the numbers of the messages that open a new episode."""

    mode = "llm"

    def __init__(self, fallback=None, attempts: int = LLM_ATTEMPTS):
        self.fallback = fallback or DeterministicBoundaryDetector()
        self.attempts = attempts

    def detect(self, turns: list[Turn]) -> BoundaryDecision:
        from common.llm import LlmError, complete_json

        messages = [
            {"role": "system", "content": BOUNDARY_SYSTEM_PROMPT},
            {"role": "user", "content": BOUNDARY_USER_PROMPT.format(window=format_window(turns))},
        ]
        try:
            reply = complete_json(messages, schema_check=lambda obj: check_reply(obj, len(turns)),
                                  max_attempts=self.attempts, temperature=0.0, step="boundaries",
                                  schema=reply_schema(len(turns)))
        except LlmError as exc:
            log.warning("LLM boundary detection failed, using the deterministic detector: %s", exc)
            decision = self.fallback.detect(turns)
            decision.mode = self.fallback.mode
            return decision
        starts = without_lone_turns(sorted({int(n) - 1 for n in reply["boundaries"] if int(n) > 1}), len(turns))
        return BoundaryDecision(starts, should_wait=bool(reply["should_wait"]), mode=self.mode)


def without_lone_turns(starts: list[int], count: int) -> list[int]:
    """The model's starts less those that would leave one turn alone in a MemCell: SmolLM2 cut an agent
    transcript's request from the tool calls that answered it (tests/test_real_llm.py), and then
    neither half is a case. One turn alone is no episode (segmentation never extracts one either)."""
    kept: list[int] = []
    for start in starts:
        if start - (kept[-1] if kept else 0) >= 2 and count - start >= 2:
            kept.append(start)
    return kept


def reply_schema(count: int) -> dict:
    """What check_reply accepts, as a JSON Schema (common/llm_formats.py): message numbers 2..count."""
    return {"type": "object", "additionalProperties": False, "required": ["boundaries", "should_wait"],
            "properties": {"boundaries": {"type": "array", "maxItems": count, "items": {"type": "integer"}},
                           "should_wait": {"type": "boolean"}}}


def check_reply(obj: dict, count: int) -> None:
    """Raise ValueError unless `obj` is {"boundaries": [message numbers 1..count], "should_wait": bool}."""
    boundaries = obj.get("boundaries")
    if not isinstance(boundaries, list):
        raise ValueError("'boundaries' must be a list of message numbers")
    for n in boundaries:
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= count:
            raise ValueError(f"'boundaries' must hold message numbers from 1 to {count}, got {n!r}")
    if not isinstance(obj.get("should_wait"), bool):
        raise ValueError("'should_wait' must be true or false")
