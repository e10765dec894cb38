"""A typed Python client for the Loci REST API (httpx; sync `Loci` and async `AsyncLoci`)."""

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

__all__ = ["AsyncLoci", "BadRequest", "Loci", "LociError", "NotFound", "PayloadTooLarge", "PermissionDenied",
           "RateLimited", "ServiceUnavailable", "Unauthorized"]
