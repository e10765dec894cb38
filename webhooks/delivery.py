"""One delivery attempt: sign the payload, POST it, record the outcome and when to try again.

The signature follows the common scheme (Stripe, Standard Webhooks): header `Loci-Signature:
t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the endpoint's secret>`. A receiver
recomputes it over the raw body and rejects an old `t` to stop replays (`verify_signature` here; a receiver
uses the clients' own, which need no Django settings: loci_client.verify_signature, TypeScript verifySignature).
"""

import hashlib
import hmac
import json
import time
from datetime import timedelta

import httpx
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from webhooks.destinations import ForbiddenDestination, check_destination
from webhooks.models import WebhookDelivery, WebhookEndpoint

Status = WebhookDelivery.Status
# Seconds before attempt n+1 after n failures: quick at first (a receiver restarting), then spaced
# out to about a day in all, as most providers do.
BACKOFF = (10, 30, 120, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600)


def sign(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify_signature(secret: str, header: str, body: bytes, *, tolerance: int = 300, now: float | None = None) -> bool:
    """True when `header` signs `body` under `secret` within `tolerance` seconds (for receivers and tests)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs((now or time.time()) - timestamp) > tolerance:
        return False
    # Compared as bytes: compare_digest raises TypeError on a str with non-ASCII characters (a forged header).
    return hmac.compare_digest(sign(secret, timestamp, body).encode(),
                               f"t={timestamp},v1={fields.get('v1', '')}".encode())


def backoff_seconds(attempts: int) -> int:
    return BACKOFF[min(attempts, len(BACKOFF)) - 1]


def attempt(delivery_id) -> str:
    """Try one due delivery; returns its status afterwards ('' when it was not due or is someone else's)."""
    now = timezone.now()
    delivery = WebhookDelivery.objects.select_related("endpoint").filter(pk=delivery_id).first()
    if delivery is None or delivery.status != Status.PENDING or delivery.next_attempt_at > now:
        return ""
    endpoint = delivery.endpoint
    # Claim the attempt: of two dispatchers that picked the same delivery, one moves it on; the
    # other's update matches nothing. The claim pushes next_attempt_at past the request's timeout.
    claimed = WebhookDelivery.objects.filter(pk=delivery.pk, status=Status.PENDING, attempts=delivery.attempts).update(
        attempts=F("attempts") + 1, next_attempt_at=now + timedelta(seconds=settings.LOCI_WEBHOOK_TIMEOUT + 30))
    if not claimed:
        return ""
    attempts = delivery.attempts + 1
    if not endpoint.is_active:
        return _record(delivery, endpoint, attempts, status=Status.FAILED, error="the endpoint was disabled")
    body = json.dumps(delivery.payload, separators=(",", ":"), ensure_ascii=False).encode()
    try:
        check_destination(endpoint.url)
    except ForbiddenDestination as exc:
        return _record(delivery, endpoint, attempts, status=Status.FAILED, error=str(exc))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Loci-Webhooks/1",
        "Loci-Event": delivery.event,
        "Loci-Delivery": str(delivery.pk),
        "Loci-Signature": sign(endpoint.secret, int(time.time()), body),
    }
    try:
        # Redirects are not followed: a 3xx could send the signed payload to a private address.
        response = httpx.post(endpoint.url, content=body, headers=headers, timeout=settings.LOCI_WEBHOOK_TIMEOUT,
                              follow_redirects=False)
    except httpx.HTTPError as exc:
        return _failed_attempt(delivery, endpoint, attempts, None, f"{type(exc).__name__}: {exc}"[:500])
    if 200 <= response.status_code < 300:
        return _record(delivery, endpoint, attempts, status=Status.DELIVERED, code=response.status_code)
    return _failed_attempt(delivery, endpoint, attempts, response.status_code, f"HTTP {response.status_code}")


def _failed_attempt(delivery, endpoint, attempts, code, error) -> str:
    if attempts >= settings.LOCI_WEBHOOK_MAX_ATTEMPTS:
        return _record(delivery, endpoint, attempts, status=Status.FAILED, code=code,
                       error=f"{error}; gave up after {attempts} attempts")
    retry_at = timezone.now() + timedelta(seconds=backoff_seconds(attempts))
    return _record(delivery, endpoint, attempts, status=Status.PENDING, code=code, error=error, retry_at=retry_at)


def _record(delivery, endpoint, attempts, *, status, code=None, error="", retry_at=None) -> str:
    now = timezone.now()
    fields = {"status": status, "response_status": code, "last_error": error[:500]}
    if status == Status.DELIVERED:
        fields["delivered_at"] = now
    if retry_at is not None:
        fields["next_attempt_at"] = retry_at
    WebhookDelivery.objects.filter(pk=delivery.pk, attempts=attempts).update(**fields)
    outcome = f"HTTP {code}" if status == Status.DELIVERED else (error or status)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(last_status=outcome[:200], last_attempt_at=now)
    return status
