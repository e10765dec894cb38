"""Request rates per API key and per signed-in user (DRF throttles), in Django's cache.

Beside tenants/throttle.py, which counts *failed* credentials per address: these count the requests of
a caller who authenticated, keyed by the API key (each key its own allowance, whoever holds it) or by
the user of a console session. The rates are settings (LOCI_RATE_LIMIT_*), read per request so that a
changed setting applies without a restart of the throttle classes. Like the failure counters, the
cache must be shared by every web process (see CACHES in loci/settings.py).
"""

import math

from django.conf import settings
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

    def allow_request(self, request, view):
        if getattr(view, "throttle_scope", None) != self.scope:
            return True
        return super().allow_request(request, view)
