"""The API's JSON parser: a body Python's json module would accept but the rest of the stack would choke on
(NaN, a lone surrogate, NUL, thousands of nested brackets, bytes that are not UTF-8) is a 400 with a reason."""

import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from common.api_errors import PayloadTooLarge, json_too_large_message
from common.stored_text import unstorable

# No API body nests deeper than a handful of levels (search filters: 3); 32 leaves room for client
# metadata and stays far below the depth at which recursive code (json itself, rendering) overflows.
MAX_DEPTH = 32


class StrictJSONParser(JSONParser):
    """RFC 8259 JSON in UTF-8, at most LOCI_MAX_JSON_BYTES and MAX_DEPTH deep, with text every database stores."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.LOCI_MAX_JSON_BYTES
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise PayloadTooLarge(json_too_large_message())
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ParseError(f"The request body is not valid UTF-8 (bad byte at position {exc.start}).") from None
        try:
            data = json.loads(text, parse_constant=_refuse_constant)
        except RecursionError:
            raise ParseError(f"The JSON body is nested more than {MAX_DEPTH} levels deep.") from None
        except ValueError as exc:  # JSONDecodeError, and _refuse_constant's
            raise ParseError(f"The request body is not valid JSON: {exc}") from None
        _check(data)
        return data


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number (NaN and Infinity are not allowed)")


def _check(data) -> None:
    """Walk the parsed body without recursion: depth, and strings no database or encoder refuses."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise ParseError(f"The JSON body is nested more than {MAX_DEPTH} levels deep.")
            if isinstance(value, dict):
                for key, item in value.items():
                    _check_text(key)
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            _check_text(value)


def _check_text(text: str) -> None:
    reason = unstorable(text)
    if reason:
        raise ParseError(f"JSON strings must not contain {reason}.")
