"""A circuit breaker per LLM endpoint: after N failed calls in a row it opens, and every LLM step
uses the rules at once instead of waiting out timeouts; after a cool-down one trial call is let
through (half-open), and its outcome closes or re-opens it.

The embedder's failover does the same with one number (retrieval/embeddings/failover.py: a failed
primary is skipped for 30 s, so a dead endpoint costs one timeout per cool-down rather than one per
call). State is per process, as the embedder's is: each worker learns on its own, in a few calls.
"""

import threading
import time

CLOSED, HALF_OPEN, OPEN = "closed", "half_open", "open"


class CircuitBreaker:
    def __init__(self, *, failures: int, cooldown: float):
        self.threshold = max(1, failures)
        self.cooldown = cooldown
        self._failures = 0
        self._opened_at: float | None = None
        # One trial at a time while half-open; a trial that never reports back (its thread died)
        # frees the slot after another cool-down.
        self._trial_until = 0.0
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        with self._lock:
            if self._opened_at is None:
                return CLOSED
            return OPEN if time.monotonic() < self._opened_at + self.cooldown else HALF_OPEN

    def seconds_open(self) -> float:
        """How long it has stayed open (0 when closed)."""
        with self._lock:
            return 0.0 if self._opened_at is None else time.monotonic() - self._opened_at

    def allow(self) -> bool:
        """Whether a call may be sent now; a True while half-open is the one trial."""
        now = time.monotonic()
        with self._lock:
            if self._opened_at is None:
                return True
            if now < self._opened_at + self.cooldown or now < self._trial_until:
                return False
            self._trial_until = now + self.cooldown
            return True

    def succeeded(self) -> None:
        """The endpoint answered (even a refusal or an unusable reply: it is up)."""
        with self._lock:
            self._failures, self._opened_at, self._trial_until = 0, None, 0.0

    def failed(self) -> bool:
        """A timeout, an unreachable server, a 5xx or a rate limit; True when this opened the breaker."""
        with self._lock:
            self._failures += 1
            was_open = self._opened_at is not None
            if was_open or self._failures >= self.threshold:  # a failed half-open trial opens it again
                self._opened_at, self._trial_until = time.monotonic(), 0.0
                return not was_open
            return False


_lock = threading.Lock()
_breakers: dict[str, CircuitBreaker] = {}


def breaker_for(endpoint: str, *, failures: int, cooldown: float) -> CircuitBreaker:
    """The endpoint's breaker, holding the numbers asked for now (a changed setting takes effect
    at the next call, without forgetting the failures already counted)."""
    with _lock:
        breaker = _breakers.get(endpoint)
        if breaker is None:
            breaker = _breakers[endpoint] = CircuitBreaker(failures=failures, cooldown=cooldown)
        breaker.threshold, breaker.cooldown = max(1, failures), cooldown
        return breaker


def breakers() -> dict[str, CircuitBreaker]:
    with _lock:
        return dict(_breakers)


def reset_breakers() -> None:
    with _lock:
        _breakers.clear()
