"""Upload size limits, enforced while the body streams in rather than after it is stored.

Two layers, because neither sees everything:
- `RequestBodyLimit` wraps the ASGI application. Django's ASGI handler reads a whole request body into
  a temporary file before any view or upload handler runs, so only this layer can refuse an oversized
  body before it is on disk: at once when Content-Length says so, else as soon as the bytes streamed
  pass LOCI_MAX_UPLOAD_REQUEST_MB.
- `UploadLimitHandler` is the first of Django's upload handlers: it refuses one file over
  LOCI_MAX_UPLOAD_MB while the multipart body is parsed, before the file is stored (under WSGI it reads
  straight from the socket, so it also bounds the request there).
A size is given in MB of 1,048,576 bytes, the unit the settings use.
"""

import json
import tempfile

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler

from common.api_errors import PayloadTooLarge

MB = 1024 * 1024


def megabytes(size: int) -> str:
    """A size in the settings' unit: "105.9 MB"."""
    return f"{size / MB:.1f} MB"


def limit_megabytes(limit: int) -> str:
    """A limit as it was configured: "100 MB" (not "104.9 MB", not "105 MB")."""
    return f"{limit // MB} MB" if limit % MB == 0 else megabytes(limit)


def request_too_large(length: int | None) -> str:
    limit = settings.LOCI_MAX_UPLOAD_REQUEST_BYTES
    size = f"is {megabytes(length)}" if length is not None else f"is larger than {limit_megabytes(limit)}"
    return (f"The request {size}; the limit is {limit_megabytes(limit)} per request "
            f"(LOCI_MAX_UPLOAD_REQUEST_MB) and {limit_megabytes(settings.LOCI_MAX_UPLOAD_BYTES)} per file "
            "(LOCI_MAX_UPLOAD_MB). Send large files in separate requests.")


class UploadTooLarge(PayloadTooLarge, RequestDataTooBig):
    """413 in the API; a plain Django view (the admin) answers it as a 400 like any RequestDataTooBig."""


class UploadLimitHandler(FileUploadHandler):
    """Counts each file's and the request's bytes as they arrive and stops at the limit."""

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        self.request_bytes = 0
        if content_length and content_length > settings.LOCI_MAX_UPLOAD_REQUEST_BYTES:
            raise UploadTooLarge(request_too_large(content_length))
        return None  # let the other handlers parse

    def receive_data_chunk(self, raw_data, start):
        limit = settings.LOCI_MAX_UPLOAD_BYTES
        if start + len(raw_data) > limit:
            raise UploadTooLarge(f"The file {self.file_name!r} is larger than the limit; the limit is "
                                 f"{limit_megabytes(limit)} per file (LOCI_MAX_UPLOAD_MB).")
        self.request_bytes += len(raw_data)
        if self.request_bytes > settings.LOCI_MAX_UPLOAD_REQUEST_BYTES:
            raise UploadTooLarge(request_too_large(None))
        return raw_data

    def file_complete(self, file_size):
        return None  # the next handler (memory or temporary file) builds the uploaded file


class RequestBodyLimit:
    """ASGI middleware: a body over LOCI_MAX_UPLOAD_REQUEST_MB is answered 413 without being read."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = settings.LOCI_MAX_UPLOAD_REQUEST_BYTES
        length = _content_length(scope)
        if length is not None and length > limit:
            return await _refuse(send, request_too_large(length))
        if length is None and _header(scope, b"transfer-encoding"):
            # Django and DRF read a body without Content-Length as empty (a chunked upload was answered
            # "Name the target knowledge base"): take it in first, within the limit, and say its length.
            spooled = await _read_chunked(receive, limit)
            if spooled is None:
                return  # the client went away
            if spooled is False:
                return await _refuse(send, request_too_large(None))
            scope, receive = _with_length(scope, receive, spooled)
            length = scope["loci.body_length"]
        received, tripped, started = 0, False, False

        async def counted_receive():
            nonlocal received, tripped
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # Django treats a disconnect while reading the body as an aborted request and
                    # returns without answering; the temporary file it was filling is closed.
                    tripped = True
                    return {"type": "http.disconnect"}
            return message

        async def tracked_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counted_receive, tracked_send)
        if tripped and not started:
            await _refuse(send, request_too_large(None))


def _header(scope, wanted: bytes) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return value
    return None


def _content_length(scope) -> int | None:
    value = _header(scope, b"content-length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


async def _read_chunked(receive, limit: int):
    """The whole body in a spooled file (on disk past 1 MB, as Django's own buffer); False past `limit`,
    None if the client disconnected."""
    spooled = tempfile.SpooledTemporaryFile(max_size=MB)
    received = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            spooled.close()
            return None
        body = message.get("body", b"")
        received += len(body)
        if received > limit:
            spooled.close()
            return False
        spooled.write(body)
        if not message.get("more_body"):
            spooled.seek(0)
            return spooled


def _with_length(scope, receive, spooled):
    """The scope with the body's Content-Length (no Transfer-Encoding), and a receive that replays it."""
    length = spooled.seek(0, 2)
    spooled.seek(0)
    headers = [(name, value) for name, value in scope["headers"]
               if name not in (b"transfer-encoding", b"content-length")]
    scope = {**scope, "headers": [*headers, (b"content-length", str(length).encode())], "loci.body_length": length}
    done = False

    async def replay():
        nonlocal done
        if done:
            return await receive()  # after the body: the server's disconnect, as before
        body = spooled.read(64 * 1024)
        done = spooled.tell() >= length
        if done:
            spooled.close()
        return {"type": "http.request", "body": body, "more_body": not done}

    return scope, replay


async def _refuse(send, message: str) -> None:
    body = json.dumps({"error": message, "detail": {"detail": message}}).encode()
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
