"""A file served under ASGI (uvicorn) is read one block at a time in a thread, not into memory first.

Django serves a streaming response whose iterator is synchronous (a FileResponse: an uploaded
original, each static file WhiteNoise serves) under ASGI by reading all of it into a list first, and
warns on every such response ("StreamingHttpResponse must consume synchronous iterators…"). This
middleware, the outermost, gives such a response an asynchronous iterator that reads each block in a
worker thread. Under WSGI (and Django's test Client) the response is left as it is.

Async only: Django runs an async-and-sync middleware in sync mode when the middleware inside it is
sync (WhiteNoise is), and then it could not hand the server an async iterator.
"""

from asgiref.sync import markcoroutinefunction, sync_to_async
from django.core.handlers.asgi import ASGIRequest

_END = object()


class AsyncFileStreaming:
    sync_capable = False
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        markcoroutinefunction(self)

    async def __call__(self, request):
        response = await self.get_response(request)
        if isinstance(request, ASGIRequest) and getattr(response, "streaming", False) and not response.is_async:
            response.streaming_content = _blocks_in_thread(response.streaming_content)
        return response


async def _blocks_in_thread(blocks):
    blocks = iter(blocks)
    read = sync_to_async(next, thread_sensitive=False)  # a file read must not queue behind the ORM's thread
    while (block := await read(blocks, _END)) is not _END:
        yield block
