"""Upload limits are enforced while the body streams in: 413 with the limit, and nothing big stored."""

import select
import socket
import threading
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from rest_framework.test import APIClient

from ingest import pipeline
from ingest.actions import ingest_document
from ingest.parsing.base import ParseError
from memory.models import Document
from tenants.access import permitted_scope
from tests.index_fixtures import free_port

MB = 1024 * 1024


@pytest.fixture
def small_limits(settings):
    settings.LOCI_MAX_UPLOAD_BYTES = 1 * MB
    settings.LOCI_MAX_UPLOAD_REQUEST_BYTES = 2 * MB


def _client(world):
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.alice_key}")
    return client


def _stored_files(settings) -> list:
    root = settings.MEDIA_ROOT
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_a_file_over_the_limit_is_refused_with_413_and_not_stored(world, small_limits, settings):
    big = SimpleUploadedFile("big.bin", b"x" * (MB + 1), content_type="application/octet-stream")
    response = _client(world).post("/api/v1/documents", {"kb": "docs", "files": [big]}, format="multipart")
    assert response.status_code == 413, response.content[:300]
    assert "'big.bin'" in response.json()["error"]
    assert "the limit is 1 MB per file (LOCI_MAX_UPLOAD_MB)" in response.json()["error"]
    assert not Document.objects.exists() and not _stored_files(settings)


def test_a_request_over_the_total_is_refused_even_when_each_file_fits(world, small_limits, settings):
    files = [SimpleUploadedFile(f"part{i}.txt", b"word " * (180 * 1024)) for i in range(3)]  # 0.9 MB each
    response = _client(world).post("/api/v1/documents", {"kb": "docs", "files": files}, format="multipart")
    assert response.status_code == 413, response.content[:300]
    assert "the limit is 2 MB per request (LOCI_MAX_UPLOAD_REQUEST_MB)" in response.json()["error"]
    assert not Document.objects.exists() and not _stored_files(settings)


def test_files_within_the_limits_are_still_accepted(world, small_limits):
    files = [SimpleUploadedFile(f"part{i}.txt", f"word{i} ".encode() * (100 * 1024)) for i in range(2)]
    response = _client(world).post("/api/v1/documents", {"kb": "docs", "files": files}, format="multipart")
    assert response.status_code == 201, response.content[:300]
    assert Document.objects.count() == 2


def test_the_size_and_the_limit_are_stated_in_the_same_unit(world, settings):
    # A file stored before a limit was lowered still fails at parse with both numbers in MB of 2^20 bytes.
    scope = permitted_scope(world.alice, write=True)
    with transaction.atomic():
        upload = ingest_document(scope, world.docs, SimpleUploadedFile("a.txt", b"w " * 1_250_000), "a.txt")
    settings.LOCI_MAX_UPLOAD_BYTES = 2 * MB
    with pytest.raises(ParseError) as exc:
        pipeline.parse_and_chunk(upload.document)
    assert str(exc.value) == "The file is 2.4 MB; the limit is 2 MB."


# --- over a real HTTP server: the ASGI app that `manage.py up` serves ---------------------------------

@pytest.fixture
def asgi_server(small_limits):
    import uvicorn

    from loci.asgi import application

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=port, lifespan="off",
                                           log_level="warning", loop="asyncio", http="h11"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    yield port
    server.should_exit = True
    thread.join(10)


def _read_response(sock) -> bytes:
    data = b""
    sock.settimeout(5)
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return data


def test_a_declared_gigabyte_is_refused_before_a_byte_of_it_is_read(asgi_server):
    with socket.create_connection(("127.0.0.1", asgi_server)) as sock:
        sock.sendall(b"POST /api/v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: multipart/form-data; boundary=xyz\r\n"
                     b"Content-Length: 1073741824\r\n\r\n")
        response = _read_response(sock)
    assert response.startswith(b"HTTP/1.1 413"), response[:200]
    assert b"The request is 1024.0 MB; the limit is 2 MB per request" in response


def test_a_streamed_body_is_cut_off_once_it_passes_the_limit(asgi_server):
    """No Content-Length (chunked): the server answers 413 after about 2 MB, not after the client's 64."""
    chunk = b"%x\r\n%s\r\n" % (64 * 1024, b"x" * 64 * 1024)
    sent = 0
    with socket.create_connection(("127.0.0.1", asgi_server)) as sock:
        sock.sendall(b"POST /api/v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: multipart/form-data; boundary=xyz\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            while sent < 64 * MB:
                if select.select([sock], [], [], 0)[0]:
                    break  # the server has answered
                sock.sendall(chunk)
                sent += 64 * 1024
        except (BrokenPipeError, ConnectionResetError):
            pass
        response = _read_response(sock)
    assert response.startswith(b"HTTP/1.1 413"), response[:200]
    assert b"the limit is 2 MB per request" in response
    assert sent < 16 * MB  # the limit plus what the sockets' buffers hold


@pytest.mark.django_db(transaction=True)
def test_a_chunked_upload_is_read_whole(world, asgi_server):
    """Transfer-Encoding: chunked, no Content-Length: the file arrives (Django used to read the body as empty)."""
    content = b"The lighthouse keeper logs the weather every morning.\n" * 200
    body = (b"--xyz\r\nContent-Disposition: form-data; name=\"kb\"\r\n\r\ndocs\r\n"
            b"--xyz\r\nContent-Disposition: form-data; name=\"files\"; filename=\"keeper.txt\"\r\n"
            b"Content-Type: text/plain\r\n\r\n" + content + b"\r\n--xyz--\r\n")
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 1000]), body[i:i + 1000]) for i in range(0, len(body), 1000))
    with socket.create_connection(("127.0.0.1", asgi_server)) as sock:
        sock.sendall(b"POST /api/v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     b"Authorization: Bearer " + world.alice_key.encode() + b"\r\n"
                     b"Content-Type: multipart/form-data; boundary=xyz\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + chunks + b"0\r\n\r\n")
        response = _read_response(sock)
    assert response.startswith(b"HTTP/1.1 201"), response[:600]
    document = Document.objects.get(filename="keeper.txt")
    assert document.size == len(content)
