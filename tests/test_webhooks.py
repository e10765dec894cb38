"""Webhooks: a tenant registers a URL, and a local receiver gets signed events, retried after a failure."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from memory.models import Document, Memory
from tests.conftest import api_client
from tests.test_conversation_api import ingest
from webhooks.delivery import verify_signature
from webhooks.dispatcher import dispatch_once
from webhooks.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.usefixtures("lite_vector_settings")


class Receiver:
    """A real HTTP server on 127.0.0.1 that answers the scripted status codes, then 200, and keeps what it got."""

    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        self.received: list[tuple[dict, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                code = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(code)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self):
        return [json.loads(body) for _, body in self.received]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def local_hooks(settings):
    settings.LOCI_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]


def register(client, url, **extra):
    return client.post("/api/v1/webhooks", {"url": url, **extra}, format="json")


def test_a_url_on_the_private_network_is_refused_unless_allowed(world, settings, receiver):
    alice = api_client(world.alice_key)
    for url in (receiver.url, "http://10.0.0.7/x", "http://169.254.169.254/latest/meta-data", "ftp://example.com/x",
                "http://user:pw@127.0.0.1/x"):
        response = register(alice, url)
        assert response.status_code == 400, (url, response.content)
        assert response.json()["error"]
    assert "LOCI_WEBHOOK_ALLOWED_HOSTS" in register(alice, receiver.url).json()["error"]
    settings.LOCI_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    assert register(alice, receiver.url).status_code == 201
    assert register(alice, "http://10.0.0.7/x").status_code == 400  # only the host named is allowed


def test_only_managers_manage_webhooks_and_tenants_never_see_each_others(world, local_hooks, receiver):
    created = register(api_client(world.alice_key), receiver.url, events=["document.ready"])
    assert created.status_code == 201
    body = created.json()
    assert body["secret"].startswith("whsec_") and body["events"] == ["document.ready"]
    listed = api_client(user=world.alice).get("/api/v1/webhooks").json()
    assert [e["url"] for e in listed["results"]] == [receiver.url] and listed["results"][0]["secret"] is None
    assert api_client(user=world.bob).get("/api/v1/webhooks").status_code == 403  # a viewer
    assert api_client(world.acme_ro_key).get("/api/v1/webhooks").status_code == 403  # a read-only key
    assert register(api_client(user=world.bob), receiver.url).status_code == 403
    charlie = api_client(world.charlie_key)
    assert charlie.get("/api/v1/webhooks").json()["results"] == []
    assert charlie.get(f"/api/v1/webhooks/{body['id']}").status_code == 404
    assert charlie.delete(f"/api/v1/webhooks/{body['id']}").status_code == 404
    assert register(api_client(world.alice_key), receiver.url, events=["memory.exploded"]).status_code == 400
    assert register(api_client(world.alice_key), receiver.url, kb="secret").status_code == 400  # globex's KB


def test_memory_events_arrive_signed_and_a_failed_delivery_is_retried(world, local_hooks, committed, settings):
    receiver = Receiver(statuses=[500])
    try:
        alice = api_client(world.alice_key)
        hook = register(alice, receiver.url, events=["memory.added", "memory.deleted"]).json()
        ingest(alice, committed)
        added = Memory.objects.filter(tenant=world.acme).count()
        assert added > 0

        first = dispatch_once()
        assert first["created"] >= 1 and first["delivered"] == 0  # the receiver answered 500
        delivery = WebhookDelivery.objects.get(event="memory.added")
        assert delivery.status == "pending" and delivery.attempts == 1 and delivery.response_status == 500
        assert delivery.next_attempt_at > timezone.now()  # backing off
        assert dispatch_once()["attempted"] == 0  # not due yet
        WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
        assert dispatch_once()["delivered"] == 1

        (headers1, body1), (headers2, body2) = receiver.received
        assert body1 == body2 and headers1["loci-delivery"] == headers2["loci-delivery"] == str(delivery.pk)
        assert verify_signature(hook["secret"], headers2["loci-signature"], body2)
        assert not verify_signature(hook["secret"], headers2["loci-signature"], body2 + b" ")
        assert not verify_signature("whsec_other", headers2["loci-signature"], body2)
        event = json.loads(body2)
        assert event["type"] == "memory.added" and event["tenant"] == "acme"
        assert len(event["data"]["memories"]) == added
        assert {m["kb"] for m in event["data"]["memories"]} == {"docs"}

        listed = alice.get(f"/api/v1/webhooks/{hook['id']}").json()
        assert listed["last_status"] == "HTTP 200"
        history = alice.get(f"/api/v1/webhooks/{hook['id']}/deliveries").json()["results"]
        assert [(d["status"], d["attempts"]) for d in history] == [("delivered", 2)]

        doomed = Memory.objects.filter(tenant=world.acme, kind="atomic_fact").first()
        assert committed(alice.delete, f"/api/v1/memories/{doomed.pk}").status_code == 200
        dispatch_once()
        deleted = receiver.events()[-1]
        assert deleted["type"] == "memory.deleted"
        assert [m["id"] for m in deleted["data"]["memories"]] == [str(doomed.pk)]
        assert deleted["data"]["memories"][0]["kb"] == "docs"
        assert dispatch_once()["created"] == 0  # each event once
    finally:
        receiver.close()


def test_a_knowledge_base_hook_hears_only_its_own_documents_and_gives_up_in_the_end(world, local_hooks, settings):
    settings.LOCI_WEBHOOK_MAX_ATTEMPTS = 2
    receiver = Receiver(statuses=[503] * 4)
    try:
        alice = api_client(world.alice_key)
        register(alice, receiver.url, kb="notes")
        now = timezone.now()
        for kb, name, status in ((world.docs, "a.txt", "ready"), (world.notes, "b.txt", "ready"),
                                 (world.notes, "c.txt", "failed")):
            Document.objects.create(kb=kb, filename=name, sha256=name, status=status, finished_at=now,
                                    error="unreadable" if status == "failed" else "")
        dispatch_once()
        events = {(e["type"], e["data"]["document"]["filename"]) for e in receiver.events()}
        assert ("document.ready", "a.txt") not in events
        assert {d.event for d in WebhookDelivery.objects.all()} == {"document.ready", "document.failed"}
        WebhookDelivery.objects.update(next_attempt_at=timezone.now())
        dispatch_once()
        # Two 503s each, with 2 attempts allowed: both are given up, with the reason.
        assert [(d.status, d.attempts) for d in WebhookDelivery.objects.all()] == [("failed", 2)] * 2
        assert all("HTTP 503; gave up after 2 attempts" == d.last_error for d in WebhookDelivery.objects.all())
        assert len(receiver.received) == 4
    finally:
        receiver.close()


def test_a_disabled_endpoint_gets_nothing_more(world, local_hooks, receiver):
    alice = api_client(world.alice_key)
    hook = register(alice, receiver.url).json()
    assert alice.patch(f"/api/v1/webhooks/{hook['id']}", {"is_active": False}, format="json").status_code == 200
    Document.objects.create(kb=world.docs, filename="x.txt", sha256="x", status="ready", finished_at=timezone.now())
    assert dispatch_once()["created"] == 0 and receiver.received == []
    assert WebhookEndpoint.objects.get(pk=hook["id"]).is_active is False
