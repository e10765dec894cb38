"""Failed credentials, counted per username and per client address in Django's cache over a fixed window.

Once a counter reaches its limit, every attempt it covers is refused until the window that counter
started ends, the right credential included: otherwise a guesser learns the password the moment it
is tried. The cache must be shared by every web process (see CACHES in loci/settings.py): a per-process
cache would give each process its own allowance.
"""

import hashlib
import math
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from tenants import clock

_PREFIX = "loci:auth-failures:"


@dataclass(frozen=True)
class Counter:
    kind: str  # "signin-user", "signin-ip", "api-key-ip"
    value: str
    limit: int

    @property
    def keys(self) -> tuple[str, str]:
        # Hashed: usernames and addresses are user input, and memcached keys may not hold spaces.
        digest = hashlib.sha256(self.value.encode("utf-8", "replace")).hexdigest()[:40]
        return f"{_PREFIX}{self.kind}:{digest}:start", f"{_PREFIX}{self.kind}:{digest}:count"


def client_address(request) -> str:
    """The caller's IP: REMOTE_ADDR, or the client LOCI_TRUSTED_PROXIES hops back in X-Forwarded-For."""
    hops = settings.LOCI_TRUSTED_PROXIES
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
    if hops and forwarded:
        return forwarded[-min(hops, len(forwarded))]
    return request.META.get("REMOTE_ADDR") or "unknown"


def sign_in_counters(username: str, request) -> list[Counter]:
    counters = [Counter("signin-user", (username or "").strip().casefold(), settings.LOCI_SIGNIN_FAILURES_PER_USER)]
    if request is not None:
        counters.append(Counter("signin-ip", client_address(request), settings.LOCI_SIGNIN_FAILURES_PER_IP))
    return counters


def api_key_counters(request) -> list[Counter]:
    return [Counter("api-key-ip", client_address(request), settings.LOCI_API_KEY_FAILURES_PER_IP)]


def api_key_lock(request) -> tuple[list[Counter], int]:
    """The failed-key counters of the request's address and the seconds it is locked out for (0: not)."""
    counters = api_key_counters(request)
    return counters, seconds_locked(counters)


def seconds_locked(counters: list[Counter]) -> int:
    """Seconds until every counter is below its limit again; 0 when none has reached it."""
    window, now, wait = settings.LOCI_AUTH_THROTTLE_WINDOW, clock.now(), 0
    values = cache.get_many([key for counter in counters for key in counter.keys])
    for counter in counters:
        start_key, count_key = counter.keys
        start, count = values.get(start_key), values.get(count_key, 0)
        # The window ends by the clock, not only by the cache's expiry of its keys (which may lag).
        if start is not None and count >= counter.limit and now < start + window:
            wait = max(wait, math.ceil(start + window - now), 1)
    return wait


def record_failure(counters: list[Counter]) -> None:
    window, now = settings.LOCI_AUTH_THROTTLE_WINDOW, clock.now()
    for counter in counters:
        start_key, count_key = counter.keys
        # The start key is the window: a count left from an ended window is overwritten, not added to.
        if cache.add(start_key, now, timeout=window):
            cache.set(count_key, 1, timeout=window)
            continue
        start = cache.get(start_key)
        if start is not None and now >= start + window:  # ended by the clock before the cache let go of it
            cache.set(start_key, now, timeout=window)
            cache.set(count_key, 1, timeout=window)
            continue
        try:
            cache.incr(count_key)  # atomic on Redis, Memcached and the local-memory cache
        except ValueError:  # the count expired a moment before the start
            cache.set(count_key, 1, timeout=window)


def forget(counters: list[Counter]) -> None:
    cache.delete_many([key for counter in counters for key in counter.keys])


def describe_wait(seconds: int) -> str:
    minutes = math.ceil(seconds / 60)
    return f"{seconds} seconds" if seconds < 90 else f"{minutes} minutes"
