"""API errors always answer {"error": "...", "detail": ...} with a readable message."""

from rest_framework import status
from rest_framework.exceptions import APIException


class PayloadTooLarge(APIException):
    """A request body over one of the size limits (HTTP 413); the message names the limit."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request is too large."
    default_code = "too_large"


def exception_handler(exc, context):
    # Imported here: rest_framework.views loads the parser classes, and the JSON parser imports this module.
    from rest_framework.views import exception_handler as drf_exception_handler

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(data, dict) and len(data) == 1 and ("detail" in data or "error" in data):
        # {"error": "..."} raised by a view is already the message: not "error: ..." again.
        message = _flatten(next(iter(data.values())))
    elif isinstance(data, dict):
        message = "; ".join(f"{field}: {_flatten(errors)}" for field, errors in data.items())
    else:
        message = _flatten(data)
    response.data = {"error": message, "detail": data}
    return response


def _flatten(errors) -> str:
    if isinstance(errors, (list, tuple)):
        return " ".join(_flatten(e) for e in errors)
    if isinstance(errors, dict):
        return "; ".join(f"{k}: {_flatten(v)}" for k, v in errors.items())
    return str(errors)
