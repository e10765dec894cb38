"""A typed Python client for the Loci REST API (httpx; sync `Loci` and async `AsyncLoci`), and the check of
a webhook's signature (`verify_signature`)."""

from loci_client.client import AsyncLoci, Loci
from loci_client.errors import (
    BadRequest,
    LociError,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    ServiceUnavailable,
    Unauthorized,
)
from loci_client.webhooks import SIGNATURE_HEADER, verify_signature

__all__ = ["SIGNATURE_HEADER", "AsyncLoci", "BadRequest", "Loci", "LociError", "NotFound", "PayloadTooLarge",
           "PermissionDenied", "RateLimited", "ServiceUnavailable", "Unauthorized", "verify_signature"]
