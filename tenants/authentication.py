"""`Authorization: Bearer loci_<id>_<secret>` for the REST API, failed keys throttled per client address."""

import logging

from rest_framework import authentication, exceptions

from tenants import throttle
from tenants.models import ApiKey

log = logging.getLogger(__name__)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        # Checked before the key, so that a guesser who is locked out learns nothing from any guess.
        counters, wait = throttle.api_key_lock(request)
        if wait:
            raise exceptions.Throttled(wait=wait, detail=(
                f"Too many failed API-key attempts from your address; try again in {throttle.describe_wait(wait)}."))
        token = token.strip()
        if not token:
            throttle.record_failure(counters)
            raise exceptions.AuthenticationFailed("Empty bearer token.")
        key = ApiKey.verify(token, touch=True)
        if key is None:
            throttle.record_failure(counters)
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        # Attributable: a write names its key in the log (memory and document histories record it too);
        # reads at DEBUG, so a busy read key doesn't flood the log (its last_used_at says it is in use).
        log.log(logging.DEBUG if request.method in ("GET", "HEAD", "OPTIONS") else logging.INFO,
                "API key %s (%s, tenant %s): %s %s", key.key_id, key.name, key.tenant.slug, request.method,
                request.path)
        # DRF's request.user stays anonymous-like; views read request.auth (the key).
        return (_KeyUser(key), key)

    def authenticate_header(self, request):
        return self.keyword


class _KeyUser:
    """A stand-in user for API-key requests so IsAuthenticated passes."""

    is_authenticated = True
    is_active = True
    is_staff = False
    is_superuser = False

    def __init__(self, key: ApiKey):
        self.key = key
        self.pk = None
        self.id = None

    def get_username(self):
        return f"key:{self.key.key_id}"

    def __str__(self):
        return self.get_username()
