"""What the OpenAPI schema says beyond each view's own serializers: the error shape every endpoint can answer.

drf-spectacular describes a view's success responses from its serializers; the errors come from
common.api_errors and the authentication, permission, throttle and size checks every endpoint shares,
so they are added here once rather than on each view.
"""

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from rest_framework import serializers

from tenants import schema  # noqa: F401  registers the API-key scheme, once a schema is made


class ErrorSerializer(serializers.Serializer):
    """Every API error: a sentence saying what to fix, and DRF's structured detail."""

    error = serializers.CharField(help_text="what went wrong and what to do about it, readable as is")
    detail = serializers.JSONField(help_text="the structured reason: a message, or the messages per field")


# Every operation can answer these (authentication, scope, throttles, strict JSON, size limits).
COMMON_ERRORS = {
    "400": "The request is malformed or invalid; `error` says what to fix.",
    "401": "No credentials, or an invalid or revoked API key.",
    "403": "The caller's role or API key does not allow this.",
    "404": "Not found in the caller's scope (another tenant's object is not found either).",
    "429": "Too many requests (LOCI_RATE_LIMIT_*) or failed credentials; `Retry-After` says when to try again.",
}
BODY_ERRORS = {"413": "The request body is over a size limit; `error` names it.",
               "415": "The body's content type is not accepted here."}

class AutoSchema(SpectacularAutoSchema):
    def _get_paginator(self):
        # Only GET lists are paginated here; an upload answers a plain list of its results.
        return super()._get_paginator() if self.method == "GET" else None

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        errors = {**COMMON_ERRORS, **(BODY_ERRORS if self.method in ("POST", "PUT", "PATCH") else {})}
        for code, description in errors.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorSerializer, code, direction=direction)
                responses[code]["description"] = description
        return responses


def without_trailing_slash(result, generator, request, public):
    """One rule for every path in the schema: no trailing slash (routes accept both, `/?`)."""
    result["paths"] = {path.rstrip("/") or "/": item for path, item in result["paths"].items()}
    return result

