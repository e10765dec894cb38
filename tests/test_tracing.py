"""OpenTelemetry spans, checked with the SDK's in-memory exporter: an HTTP request, a search's stages, a
document's stages and every LLM call; off by default, and then nothing is recorded."""

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from common import tracing
from common.llm import LlmError, complete_json
from ingest.actions import ingest_document
from ingest.tasks import run_inline
from tenants.access import permitted_scope
from tests.conftest import api_client
from tests.fake_openai import fake_openai  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("lite_vector_settings")


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    tracing.configure(exporter)
    yield exporter
    tracing.shutdown()


def names(exporter) -> list[str]:
    return [s.name for s in exporter.get_finished_spans()]


def test_tracing_is_off_by_default(settings):
    assert settings.LOCI_OTLP_ENDPOINT == ""
    tracing.configure()
    assert not tracing.enabled()
    with tracing.span("nothing") as current:
        assert current is None


def test_with_an_endpoint_spans_are_sent_by_otlp_over_http(settings):
    received = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append((self.path, self.headers["Content-Type"], self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings.LOCI_OTLP_ENDPOINT = f"http://127.0.0.1:{server.server_port}/v1/traces"
        tracing.configure()
        with tracing.span("search", {"loci.search.method": "keyword"}):
            pass
        tracing.shutdown()  # flushes the batch
    finally:
        server.shutdown()
    (path, content_type, body), = received
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    assert b"search" in body and b"loci.search.method" in body and b"loci" in body


def test_an_http_request_and_a_searchs_stages_are_spans_of_one_trace(world, spans):
    response = api_client(world.alice_key).post("/api/v1/memories/search", {"query": "harbor budget"},
                                                format="json", HTTP_TRACEPARENT=f"00-{'ab' * 16}-{'cd' * 8}-01")
    assert response.status_code == 200
    finished = {s.name: s for s in spans.get_finished_spans()}
    request = finished["POST /api/v1/memories/search"]
    assert request.attributes["http.response.status_code"] == 200
    assert request.attributes["http.request.method"] == "POST"
    assert format(request.context.trace_id, "032x") == "ab" * 16  # continues the caller's trace
    assert {"search", "search.retrieve", "search.memory_kinds"} <= set(finished)
    assert finished["search"].parent.span_id == request.context.span_id
    assert finished["search.retrieve"].parent.span_id == finished["search"].context.span_id
    assert finished["search"].attributes["loci.search.method"] == "hybrid"


def test_a_documents_stages_are_spans(world, spans, tmp_path):
    path = tmp_path / "memo.md"
    path.write_text("# Harbor\n\nThe Harbor project moved its launch to March 14. Dana Reyes leads it.\n")
    with open(path, "rb") as fh:
        document = ingest_document(permitted_scope(world.alice, write=True), world.docs, fh, "memo.md").document
    assert run_inline(document.pk).status == "ready"
    stages = [s for s in spans.get_finished_spans() if s.name.startswith("document.")]
    assert [s.name for s in stages] == ["document.parse", "document.extract", "document.index"]
    assert {s.attributes["loci.document.id"] for s in stages} == {document.pk}


def test_every_llm_call_is_a_span_and_a_failed_one_says_so(fake_openai, spans):  # noqa: F811
    fake_openai.queue_chat("not json", '{"fact": "fixed"}')
    assert complete_json([{"role": "user", "content": "A fact?"}], max_attempts=2) == {"fact": "fixed"}
    calls = [s for s in spans.get_finished_spans() if s.name == "llm.chat"]
    assert len(calls) == 2 and all(s.attributes["gen_ai.request.model"] == "fake-llm" for s in calls)

    spans.clear()
    fake_openai.queue_error("chat", 403, "forbidden")
    with pytest.raises(LlmError):
        complete_json([{"role": "user", "content": "A fact?"}], max_attempts=1)
    (refused,) = [s for s in spans.get_finished_spans() if s.name == "llm.chat"]
    assert not refused.status.is_ok and refused.events[0].name == "exception"
