"""A real local OpenAI-compatible HTTP server with scripted replies, and the `fake_openai` fixture.

The server speaks `/v1/chat/completions`, `/v1/embeddings` and `/v1/rerank` over real HTTP, so the
code under test runs its real `openai` client, timeouts and retries. A test queues replies per
endpoint (valid JSON, malformed text, an HTTP error, a delay past the client timeout); once a queue
is empty the endpoint answers with a deterministic default (chat: HTTP 500, so an unscripted call
is loud). Every request body is recorded for assertions.

Use it in a test module with `from tests.fake_openai import fake_openai  # noqa: F401`.
"""

import hashlib
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

ENDPOINTS = {"/v1/chat/completions": "chat", "/v1/embeddings": "embeddings", "/v1/rerank": "rerank"}


@dataclass
class Reply:
    """One scripted answer: a status, a body (dict → JSON, str → sent as is) and a delay before it."""

    status: int = 200
    body: dict | str | None = None
    delay: float = 0.0
    headers: dict = field(default_factory=dict)


@dataclass
class Request:
    endpoint: str
    body: dict
    headers: dict


def fake_vector(text: str, dim: int) -> list[float]:
    """Deterministic, unnormalised pseudo-embedding of `text` (so callers must normalise)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    return (np.random.default_rng(seed).standard_normal(dim) * 3.0).astype(np.float32).tolist()


def _overlap_score(query: str, document: str) -> float:
    q, d = set(query.lower().split()), set(document.lower().split())
    return len(q & d) / (len(q) or 1)


class FakeOpenAI:
    """A local OpenAI-compatible server whose replies a test scripts in advance."""

    def __init__(self, embedding_dim: int = 8):
        self.embedding_dim = embedding_dim
        self.requests: list[Request] = []
        self._queues: dict[str, deque[Reply]] = {name: deque() for name in ENDPOINTS.values()}
        # Chat replies kept for the requests whose messages contain a text (a prompt's own words), so
        # a test scripts one of several model calls a flush makes without knowing their order.
        self._routed: list[tuple[str, deque[Reply]]] = []
        self._lock = threading.Lock()
        # Set at shutdown so handlers sleeping through a scripted delay return at once.
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-openai", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "FakeOpenAI":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- scripting
    def queue(self, endpoint: str, *replies: Reply) -> None:
        with self._lock:
            self._queues[endpoint].extend(replies)

    def queue_chat(self, *contents: str, delay: float = 0.0) -> None:
        """Queue assistant messages with these exact contents (valid JSON, fenced, or garbage)."""
        self.queue("chat", *(Reply(body=_chat_body(content), delay=delay) for content in contents))

    def queue_json(self, obj: dict) -> None:
        self.queue_chat(json.dumps(obj))

    def queue_json_for(self, needle: str, obj: dict) -> None:
        """Answer `obj` to the next chat request whose messages contain `needle`, whatever its turn."""
        self.queue_for(needle, Reply(body=_chat_body(json.dumps(obj))))

    def queue_for(self, needle: str, *replies: Reply) -> None:
        """Answer these, in turn, to the next chat requests whose messages contain `needle`."""
        with self._lock:
            self._routed.append((needle, deque(replies)))

    def queue_error(self, endpoint: str, status: int, message: str = "scripted failure", times: int = 1) -> None:
        body = {"error": {"message": message, "type": "server_error" if status >= 500 else "invalid_request_error"}}
        self.queue(endpoint, *(Reply(status=status, body=body) for _ in range(times)))

    def queue_delay(self, endpoint: str, seconds: float, times: int = 1) -> None:
        """Queue replies that arrive only after `seconds` (longer than the client's timeout)."""
        body = _chat_body("{}") if endpoint == "chat" else {"error": {"message": "too late"}}
        self.queue(endpoint, *(Reply(body=body, delay=seconds) for _ in range(times)))

    def queue_rerank(self, scores: list[float]) -> None:
        results = [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]
        results.sort(key=lambda r: r["relevance_score"], reverse=True)
        self.queue("rerank", Reply(body={"results": results}))

    def bodies(self, endpoint: str) -> list[dict]:
        return [r.body for r in self.requests if r.endpoint == endpoint]

    # --- serving
    def _next_reply(self, endpoint: str, body: dict, headers: dict) -> Reply:
        with self._lock:
            self.requests.append(Request(endpoint, body, headers))
            if endpoint == "chat":
                said = json.dumps(body.get("messages", []), ensure_ascii=False)
                for needle, replies in self._routed:
                    if replies and needle in said:
                        return replies.popleft()
            if self._queues[endpoint]:
                return self._queues[endpoint].popleft()
        return self._default_reply(endpoint, body)

    def _default_reply(self, endpoint: str, body: dict) -> Reply:
        if endpoint == "embeddings":
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
            data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, self.embedding_dim)} for i, t in enumerate(inputs)]
            return Reply(body={"object": "list", "data": data, "model": body.get("model", ""), "usage": {"prompt_tokens": 0, "total_tokens": 0}})
        if endpoint == "rerank":
            docs = body.get("documents") or []
            results = [{"index": i, "relevance_score": _overlap_score(body.get("query", ""), d)} for i, d in enumerate(docs)]
            results.sort(key=lambda r: r["relevance_score"], reverse=True)
            return Reply(body={"results": results[: body.get("top_n") or len(results)]})
        return Reply(status=500, body={"error": {"message": "no scripted chat reply left"}})

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                endpoint = ENDPOINTS.get(self.path.split("?")[0])
                if endpoint is None:
                    return self._send(Reply(status=404, body={"error": {"message": f"no route {self.path}"}}))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    return self._send(Reply(status=400, body={"error": {"message": "request body is not JSON"}}))
                reply = fake._next_reply(endpoint, body, {k.lower(): v for k, v in self.headers.items()})
                if reply.delay and fake._stopping.wait(reply.delay):
                    return
                self._send(reply)

            def _send(self, reply: Reply):
                payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body or {})
                data = payload.encode("utf-8")
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout) before a delayed reply was ready

            def log_message(self, format, *args):
                pass

        return Handler


def chat_reply(content: str, finish_reason: str = "stop") -> Reply:
    """An assistant message; finish_reason "length" is a reply cut off at max_tokens."""
    return Reply(body=_chat_body(content, finish_reason))


def _chat_body(content: str, finish_reason: str = "stop") -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-llm",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


@pytest.fixture
def fake_openai(settings):
    """A running FakeOpenAI with the LLM, embedding and rerank settings pointing at it."""
    from common.llm import reset_llm_client
    from retrieval.embeddings import reset_embedder
    from retrieval.runtimes.rerankers import reset_reranker

    server = FakeOpenAI().start()
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.LLM_ENABLED = True
    settings.LLM_MODEL = "fake-llm"
    settings.LLM_TIMEOUT = 5.0
    settings.LLM_MAX_RETRIES = 2
    settings.LLM_BACKOFF_SECONDS = 0.01
    # Unscripted chat calls answer 500 on purpose, so many tests fail every step of a flush in turn;
    # the breaker is off here unless a test sets its own threshold (tests/test_llm_limits.py).
    settings.LLM_BREAKER_FAILURES = 1_000_000
    settings.EMBEDDING_BASE_URL = server.base_url
    settings.EMBEDDING_API_KEY = "embed-key"
    settings.EMBEDDING_MODEL = "fake-embed"
    settings.EMBEDDING_DIM = server.embedding_dim
    settings.RERANK_BASE_URL = server.base_url
    settings.RERANK_API_KEY = "rerank-key"
    settings.RERANK_MODEL = "fake-rerank"
    resets = (reset_llm_client, reset_embedder, reset_reranker)
    for reset in resets:
        reset()
    try:
        yield server
    finally:
        server.stop()
        for reset in resets:
            reset()
