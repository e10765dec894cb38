"""What the terminal shows while Loci serves (issue 29): no warning lines that look like errors."""

import warnings

from asgiref.sync import async_to_sync
from django.test import AsyncClient

from tests.conftest import DOCS
from tests.test_document_cancel import upload


def test_an_original_is_streamed_under_asgi_without_a_warning(world):
    document = upload(world, DOCS / "LICENSE.md")
    client = AsyncClient()
    client.force_login(world.alice)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        response = async_to_sync(client.get)(f"/api/v1/documents/{document.pk}/original")
        assert response.status_code == 200, response.content
        body = b"".join(async_to_sync(_collect)(response))
    assert body == (DOCS / "LICENSE.md").read_bytes()
    assert not [w for w in caught if "synchronous iterators" in str(w.message)], [str(w.message) for w in caught]


async def _collect(response):
    return [part async for part in response]  # as Django's ASGI handler hands it to the server
