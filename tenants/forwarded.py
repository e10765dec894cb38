"""Requests that come through a proxy the settings do not trust: noticed, so `up` and /healthz can say so.

Failed credentials are counted per client address (tenants/throttle.py). Behind a reverse proxy with
LOCI_TRUSTED_PROXIES=0 every client has the proxy's address, so one client guessing keys locks out
every user (issue 30). Trusting X-Forwarded-For by default would let any client choose its own
address, so the setting stays opt-in; this middleware only notices the mismatch: a request carrying
X-Forwarded-For while no proxy is trusted. The first one of each hour is kept in the cache (shared
by every web process) with the peer's address.
"""

import time

from django.conf import settings
from django.core.cache import cache

NOTICE_KEY = "loci:untrusted-forwarded-for"
REMEMBER_SECONDS = 3600


class UntrustedForwardingMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not settings.LOCI_TRUSTED_PROXIES and request.META.get("HTTP_X_FORWARDED_FOR"):
            # add(): one cache write an hour, not one per request.
            cache.add(NOTICE_KEY, {"peer": request.META.get("REMOTE_ADDR") or "unknown", "at": time.time()},
                      REMEMBER_SECONDS)
        return self.get_response(request)


def untrusted_forwarding_notice() -> str | None:
    """What to tell an operator when requests arrived with X-Forwarded-For from an untrusted peer."""
    if settings.LOCI_TRUSTED_PROXIES:
        return None
    seen = cache.get(NOTICE_KEY)
    if not seen:
        return None
    return (f"Requests arrive with X-Forwarded-For from {seen['peer']} while LOCI_TRUSTED_PROXIES is 0: every "
            "client behind that proxy shares its address, so one client's failed sign-ins or API keys lock "
            "out all of them. If that peer is your reverse proxy, set LOCI_TRUSTED_PROXIES to the number of "
            "proxies in front of Loci (1 for one nginx).")
