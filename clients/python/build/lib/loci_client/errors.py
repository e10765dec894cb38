"""The API's errors as exceptions: every answer of 400 and above raises a LociError (or a subclass)."""

from __future__ import annotations  # `int | None` on Python 3.9


class LociError(Exception):
    """An error answer of the Loci API: its HTTP status, its readable message and its detail."""

    def __init__(self, status: int, message: str, detail=None):
        super().__init__(f"{status}: {message}")
        self.status, self.message, self.detail = status, message, detail


class BadRequest(LociError):
    """400: the request must be fixed (the message says how)."""


class Unauthorized(LociError):
    """401: no API key, or an invalid or revoked one."""


class PermissionDenied(LociError):
    """403: the key may not do this (a read-only key writing, say)."""


class NotFound(LociError):
    """404: nothing of that id in the knowledge bases the key may read."""


class PayloadTooLarge(LociError):
    """413: over an upload limit (the message names it)."""


class RateLimited(LociError):
    """429: too many failed credentials from this address; `retry_after` is in seconds."""

    def __init__(self, status: int, message: str, detail=None, retry_after: int | None = None):
        super().__init__(status, message, detail)
        self.retry_after = retry_after


class ServiceUnavailable(LociError):
    """503 (an engine failed) or 504 (it did not answer in time): worth retrying later."""


BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: PermissionDenied, 404: NotFound, 413: PayloadTooLarge,
             429: RateLimited, 503: ServiceUnavailable, 504: ServiceUnavailable}


def error_for(status: int, body, retry_after: str | None) -> LociError:
    """The exception for an error answer: {"error": "...", "detail": ...} from Loci, else whatever text came."""
    if isinstance(body, dict) and "error" in body:
        message, detail = str(body["error"]), body.get("detail")
    else:
        message, detail = (str(body)[:500] or f"HTTP {status}"), body
    cls = BY_STATUS.get(status, LociError)
    if cls is RateLimited:
        return RateLimited(status, message, detail, int(retry_after) if (retry_after or "").isdigit() else None)
    return cls(status, message, detail)
