"""Request rates per API key and per signed-in user (DRF throttles), in Django's cache.

Beside tenants/throttle.py, which counts *failed* credentials per address: these count the requests of
a caller who authenticated, keyed by the API key (each key its own allowance, whoever holds it) or by
the user of a console session. The rates are settings (LOCI_RATE_LIMIT_*), read per request so that a
changed setting applies without a restart of the throttle classes. Like the failure counters, the
cache must be shared by every web process (see CACHES in loci/settings.py).
"""

import math

from django.conf import settings
from django.core.cache import cache
from rest_framework import exceptions, throttling

from tenants import clock
from tenants.models import ApiKey


class PrincipalRateThrottle(throttling.SimpleRateThrottle):
    """Every API request of one API key or one user: LOCI_RATE_LIMIT_USER."""

    scope = "user"
    setting = "LOCI_RATE_LIMIT_USER"
    timer = staticmethod(lambda: clock.now())  # looked up per call: a test's clock replaces clock.now

    def get_rate(self):
        return settings.LOCI_RATE_LIMITS.get(self.scope)  # None: unlimited

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiKey):
            ident = f"key-{request.auth.pk}"
        elif request.user and request.user.is_authenticated and request.user.pk is not None:
            ident = f"user-{request.user.pk}"
        else:
            return None  # anonymous requests are refused by the permissions, or are public (the docs)
        return f"loci:rate:{self.scope}:{ident}"

    def throttle_failure(self):
        # Raised here rather than returned, so the message can name the limit and the setting.
        wait = self.wait() or self.duration
        who = "this API key" if self.key.startswith(f"loci:rate:{self.scope}:key-") else "your account"
        raise exceptions.Throttled(wait=wait, detail=(
            f"Too many requests from {who}: the limit is {self.rate} ({self.setting}); "
            f"try again in {math.ceil(wait)} seconds."))


class SearchRateThrottle(PrincipalRateThrottle):
    """Searches of one API key or one user, on views that declare `throttle_scope = "search"`."""

    scope = "search"
    setting = "LOCI_RATE_LIMIT_SEARCH"

    def get_cache_key(self, request, view):
        # None: not counted (a view that does not search); asked only when the rate is set.
        if getattr(view, "throttle_scope", None) != self.scope:
            return None
        return super().get_cache_key(request, view)


class SearchCpuThrottle(throttling.BaseThrottle):
    """CPU seconds of one API key's (or user's) searches in the last minute: LOCI_SEARCH_CPU_PER_MINUTE.

    The request rates count searches; this counts what they cost. Each search's CPU (its
    `query.cpu_ms`, charged by the view with `charge_search_cpu` once it has answered) stays in the
    window for 60 s; a search that arrives while the window holds the allowance is refused with 429
    and the seconds until enough of it has left. So one key asking for the costliest searches the
    caps allow, as fast as its request rate lets it, gets at most this much of the server's CPU.
    """

    def allow_request(self, request, view):
        limit = settings.LOCI_SEARCH_CPU_PER_MINUTE
        key = _cpu_key(request)
        if getattr(view, "throttle_scope", None) != "search" or not limit or key is None:
            return True
        now = clock.now()
        history = _cpu_history(key, now)
        used = sum(c for _, c in history)
        if used < limit:
            return True
        for at, seconds in history:  # oldest first: when has enough left the window?
            used -= seconds
            if used < limit:
                wait = max(1.0, at + CPU_WINDOW - now)
                break
        who = "this API key" if isinstance(request.auth, ApiKey) else "your account"
        raise exceptions.Throttled(wait=wait, detail=(
            f"Too much search CPU from {who}: {sum(c for _, c in history):.1f} CPU-seconds in the last minute, the "
            f"limit is {limit:g} (LOCI_SEARCH_CPU_PER_MINUTE); try again in {math.ceil(wait)} seconds."))


CPU_WINDOW = 60.0


def charge_search_cpu(request, seconds: float) -> None:
    """Count a search's CPU seconds against its caller's LOCI_SEARCH_CPU_PER_MINUTE."""
    key = _cpu_key(request)
    if key is None or not settings.LOCI_SEARCH_CPU_PER_MINUTE:
        return
    now = clock.now()
    cache.set(key, [*_cpu_history(key, now), (now, seconds)], int(CPU_WINDOW) + 1)


def _cpu_history(key: str, now: float) -> list[tuple[float, float]]:
    return [(at, c) for at, c in cache.get(key, []) if at > now - CPU_WINDOW]


def _cpu_key(request) -> str | None:
    if isinstance(request.auth, ApiKey):
        return f"loci:cpu:search:key-{request.auth.pk}"
    if request.user and request.user.is_authenticated and request.user.pk is not None:
        return f"loci:cpu:search:user-{request.user.pk}"
    return None


class Caller:
    """An API key calling from outside a DRF request (the MCP tools): what the throttles read of a request."""

    user = None

    def __init__(self, key: ApiKey):
        self.auth = key


class _View:
    def __init__(self, searching: bool):
        self.throttle_scope = "search" if searching else None


def check(caller: Caller, *, searching: bool) -> None:
    """Raise Throttled, as the REST API would answer 429, if `caller` is past an allowance now."""
    view = _View(searching)
    for throttle in (PrincipalRateThrottle(), SearchRateThrottle(), SearchCpuThrottle()):
        throttle.allow_request(caller, view)  # each raises Throttled with its reason when over
