"""API errors always answer {"error": "...", "detail": ...} with a readable message."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.views import defaults
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


# --- Errors Django answers before (or instead of) a DRF view: a URL no route matches (an id that
# fails its converter: /memories/<not a uuid>, /documents/0.5/), a body Django itself refuses, a
# crash. Under /api/ they are JSON like every other API error; elsewhere Django's own pages.

API_PREFIX = "/api/"


def _is_api(request) -> bool:
    return request.path.startswith(API_PREFIX)


def not_found(request, exception=None):
    if not _is_api(request):
        return defaults.page_not_found(request, exception)
    return api_error(404, "Not found: no API operation or object at this address.", {"path": request.path})


def bad_request(request, exception=None):
    if not _is_api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        return api_error(413, json_too_large_message(), None)
    return api_error(400, f"Bad request: {exception or 'the request could not be read'}.", None)


def server_error(request):
    if not _is_api(request):
        return defaults.server_error(request)
    return api_error(500, "Internal error: the server failed on this request; it is in the server's log.", None)


def api_error(status_code: int, error: str, detail):
    return JsonResponse({"error": error, "detail": detail}, status=status_code)


def json_too_large_message() -> str:
    limit = settings.LOCI_MAX_JSON_BYTES
    return (f"The JSON body is larger than {limit / 1048576:g} MB; the limit is {limit:,} bytes "
            "(LOCI_MAX_JSON_MB).")
