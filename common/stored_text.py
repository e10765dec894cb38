"""Text every database and encoder stores: no NUL, no lone surrogate. The API answers any other with a 400
and a reason wherever it arrives: in a JSON body (common.json_parser) or in a query parameter (below)."""

from common.api_errors import API_PREFIX, api_error


def unstorable(text: str) -> str | None:
    """What in `text` no database stores (PostgreSQL refuses NUL, UTF-8 a lone surrogate), or None."""
    if "\x00" in text:
        return "NUL characters (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "lone surrogates (an unpaired \\ud800-\\udfff escape)"
    return None


class StoredTextQueryMiddleware:
    """A query parameter of /api/ with such text is refused before a view puts it into a query or a header
    line (GET /export?user_id=%00 answered 200 with a NUL in its first line)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith(API_PREFIX):
            for name, values in request.GET.lists():
                for text in (name, *values):
                    reason = unstorable(text)
                    if reason:
                        shown = name.replace("\x00", "\\u0000")
                        return api_error(400, f"Query parameter '{shown}' must not contain {reason}.",
                                         {"parameter": shown})
        return self.get_response(request)
