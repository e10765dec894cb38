"""The MCP server over streamable HTTP at /mcp, inside the ASGI application `manage.py up` serves.

`with_mcp(django_app)` routes /mcp to the SDK's streamable HTTP app and everything else to Django.
A request reaches the SDK only with a valid API key, checked by the REST API's own authentication
class (the same messages, the same throttling of failed keys per client address); a missing or bad
key is answered 401 (429 with Retry-After once an address is locked out), as the REST API answers it.
Every tool call then resolves the key from its request's header to the key's permission scope.

The SDK runs stateless (each POST is complete in itself, answered with JSON), so any web process or
replica can answer any request: nothing is held between requests but the key the client sends again.
Its session manager needs a running task group: started at the first request (or the ASGI lifespan
startup, when the server sends one) and stopped at lifespan shutdown.
"""

import asyncio
import json
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest
from django.http.request import split_domain_port, validate_host
from mcp.server.transport_security import TransportSecuritySettings
from rest_framework import exceptions

from integrations.mcp_server import build_server
from tenants.authentication import ApiKeyAuthentication

PATH = "/mcp"


def bearer_token(headers) -> str | None:
    scheme, _, token = (headers.get("authorization") or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


class McpEndpoint:
    """The SDK's streamable HTTP app behind the REST API's key check and Django's ALLOWED_HOSTS."""

    def __init__(self):
        self.server = build_server(lambda ctx: bearer_token(ctx.headers or {}))
        self.app = self.server.streamable_http_app(
            streamable_http_path=PATH, stateless_http=True, json_response=True,
            # A bearer key, never a cookie, authorises each request, so a rebound DNS name gains a page
            # nothing; the Host header is checked against ALLOWED_HOSTS below, as Django checks it.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=settings.LOCI_MAX_UPLOAD_REQUEST_BYTES,
        )
        self._lock = asyncio.Lock()
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    async def __call__(self, scope, receive, send):
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        host = headers.get("host", "")
        if not validate_host(split_domain_port(host)[0], settings.ALLOWED_HOSTS):
            return await _answer(send, 400, f"Invalid Host header {host!r}; add it to ALLOWED_HOSTS.")
        refusal = await sync_to_async(_refusal, thread_sensitive=True)(headers, scope.get("client"))
        if refusal is not None:
            return await _answer(send, *refusal)
        await self.start()
        await self.app(scope, receive, send)

    async def start(self):
        async with self._lock:
            if self._task is not None:
                return
            started, self._stop = asyncio.Event(), asyncio.Event()

            async def run():
                async with self.server.session_manager.run():
                    started.set()
                    await self._stop.wait()

            self._task = asyncio.create_task(run())
            await started.wait()

    async def stop(self):
        if self._task is not None:
            self._stop.set()
            await self._task


def _refusal(headers: dict, client) -> tuple | None:
    """None for a valid key, else (status, message, extra headers), from the REST API's authentication."""
    request = HttpRequest()  # what the authentication class reads: the header and the client address
    request.META = {"HTTP_AUTHORIZATION": headers.get("authorization", ""), "REMOTE_ADDR": client[0] if client else "",
                    "HTTP_X_FORWARDED_FOR": headers.get("x-forwarded-for", "")}
    auth = ApiKeyAuthentication()
    try:
        if auth.authenticate(request) is None:
            raise exceptions.NotAuthenticated("Send your API key as 'Authorization: Bearer <key>'.")
    except exceptions.Throttled as exc:
        return 429, str(exc.detail), [(b"retry-after", b"%d" % exc.wait)]  # as DRF sends it
    except exceptions.APIException as exc:
        return 401, str(exc.detail), [(b"www-authenticate", auth.authenticate_header(None).encode())]
    return None


# JSON-RPC's implementation-defined server error codes: the key was refused; anything else.
UNAUTHORIZED, REFUSED = -32001, -32000


async def _answer(send, status: int, message: str, extra=()):
    # A JSON-RPC error (id null: the request was refused before it was read), so an MCP client raises
    # it with this message ("Invalid or revoked API key.") instead of a generic "error response".
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
        "code": UNAUTHORIZED if status == 401 else REFUSED, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})


def with_mcp(django_app):
    """An ASGI app serving MCP at /mcp and Django everywhere else."""
    endpoint = McpEndpoint()

    async def application(scope, receive, send):
        if scope["type"] == "lifespan":
            return await _lifespan(endpoint, receive, send)
        if scope["type"] == "http" and (scope["path"] == PATH or scope["path"].startswith(PATH + "/")):
            return await endpoint(scope, receive, send)
        return await django_app(scope, receive, send)

    application.mcp = endpoint
    return application


async def _lifespan(endpoint, receive, send):
    """Django answers no lifespan events; this one stops the MCP session manager cleanly at shutdown."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await endpoint.stop()
            await send({"type": "lifespan.shutdown.complete"})
            return
