"""Checking a webhook's `Loci-Signature` header in a receiver: the standard library only, no server code.

The server (webhooks/delivery.py) sends `Loci-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of
"<t>.<raw body>" under the endpoint's secret>`; a receiver recomputes it over the raw body, as received,
and refuses an old `t`, so that a captured delivery cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

SIGNATURE_HEADER = "Loci-Signature"
# Seconds a signature stays good either side of now: the server's own default, room for clock skew.
DEFAULT_TOLERANCE = 300


def verify_signature(secret: str, header: str, body: bytes | str, *, tolerance: float = DEFAULT_TOLERANCE,
                     now: float | None = None) -> bool:
    """True when `header` (the Loci-Signature value) signs `body` under `secret`, made within `tolerance` s of now."""
    fields = dict(part.strip().split("=", 1) for part in header.split(",") if "=" in part)
    timestamp, given = fields.get("t", ""), fields.get("v1", "")
    if not re.fullmatch(r"[0-9]+", timestamp) or not re.fullmatch(r"[0-9a-f]{64}", given):
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > tolerance:
        return False
    raw = body.encode() if isinstance(body, str) else body
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, given)
