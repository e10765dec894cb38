"""The one chat-model client: any OpenAI-compatible endpoint, JSON replies, bounded retries.

`complete_json()` asks for a JSON object (with `response_format` when the server accepts it),
parses it even when wrapped in ```json fences or preceded by a <think> block, validates it with the
caller's check, and retries malformed replies, timeouts, 429 and 5xx with exponential backoff.
The `openai` client's own retries are off (`max_retries=0`) so this loop is the only one.

Every call is bounded (issue 37): it goes through the endpoint's circuit breaker (llm_breaker), gets
at most the time left in its unit of work (llm_scope: a flush, an agentic search), carries
`max_tokens`, and has its prompt cut to the model's window (llm_context). A 400 that names the
context length is an overflow, not a rejected JSON mode; one naming temperature is retried once
without it, and the endpoint is remembered as taking none.

The client contract (the BACKEND of a LOCI_LLM_CLIENTS alias, called with its OPTIONS): it returns
an `openai.OpenAI`-compatible client (`chat.completions.create(messages=..., model=..., **kw)`
answering an object with `.choices[0].message.content`, raising openai.APIStatusError with
`status_code` for an HTTP refusal and openai.APIConnectionError for a timeout or an unreachable
server), or None when no LLM is configured; its own retries off. It is shared by every thread
unless it sets `thread_safe = False`.
"""

import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable

import openai
from django.conf import settings

from common import llm_context, llm_formats, llm_scope, llm_usage, metrics, tracing
from common.backends import DEFAULT_ALIAS, llm_clients
from common.llm_breaker import breaker_for, reset_breakers

logger = logging.getLogger(__name__)

# Statuses worth retrying: timeouts, conflicts and rate limits clear up, 5xx are the server's fault.
_TRANSIENT_STATUSES = {408, 409, 429}
# A server without JSON mode answers 400 (vLLM, OpenAI for unsupported models) or 422 (some proxies).
_JSON_MODE_REJECTED = {400, 422}
_MAX_BACKOFF_SECONDS = 30.0
_MAX_RETRY_AFTER_SECONDS = 60.0
# Enough of a bad reply for the model to see its mistake without re-sending a long essay.
_ECHO_CHARS = 2000

# After a reply cut off at max_tokens (a small model repeating list items until the limit).
_CUT_OFF_NOTE = ("Your previous reply was cut off at the length limit before its JSON object closed. "
                 "Answer again with a shorter JSON object: fewer and shorter items, nothing repeated.")

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.S)
_THINK = re.compile(r"<think>.*?</think>", re.S)
# Raw control characters: llama-cpp-python's JSON-schema grammar lets a string hold them (its `char` is
# [^"\\]), and SmolLM2 under it wrote raw newlines inside strings, which JSON forbids. Outside strings
# they are whitespace, inside they become a space: the reply keeps its meaning.
_CONTROL = re.compile(r"[\x00-\x1f]")

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"  # where the openai client goes without a base URL

_lock = threading.Lock()
_no_temperature: set[tuple[str, str]] = set()  # (endpoint, model) that refused a temperature


class LlmError(Exception):
    """The chat model gave no usable answer within the allowed attempts (or refused the request)."""


class _Overflow(Exception):
    """The server said the prompt and max_tokens exceed the model's context."""


def _client_key() -> tuple:
    return (settings.OPENAI_BASE_URL or None, settings.OPENAI_API_KEY or "none", float(settings.LLM_TIMEOUT))


def build_llm_client(options: dict) -> openai.OpenAI | None:
    """The BACKEND of the default LOCI_LLM_CLIENTS alias: an OpenAI client on OPENAI_BASE_URL /
    OPENAI_API_KEY / LLM_TIMEOUT (each overridable in OPTIONS as base_url, api_key, timeout), or None
    when no LLM is configured (settings.LLM_ENABLED false). Its own retries are off: complete_json retries."""
    if not settings.LLM_ENABLED:
        return None
    base_url, api_key, timeout = _client_key()
    return openai.OpenAI(base_url=options.get("base_url", base_url), api_key=options.get("api_key", api_key),
                         timeout=float(options.get("timeout", timeout)), max_retries=0)


def llm_client(alias: str = DEFAULT_ALIAS) -> openai.OpenAI | None:
    """The process's chat client of `alias`, or None when no LLM is configured."""
    return llm_clients.get(alias)


def endpoint_of(client) -> str:
    """The URL a client sends to: what the breaker and the remembered refusals are kept by."""
    url = getattr(client, "base_url", None)
    return str(url).rstrip("/") if url else (settings.OPENAI_BASE_URL or OPENAI_DEFAULT_URL)


def reset_llm_client() -> None:
    llm_clients.reset()
    reset_breakers()
    llm_formats.reset()
    with _lock:
        _no_temperature.clear()


def parse_json_reply(text: str | None) -> dict:
    """The JSON object in a model reply: bare, fenced in ```json, or the outermost {...}; else ValueError."""
    if not text or not text.strip():
        raise ValueError("the reply is empty")
    text = _THINK.sub("", text).strip()
    candidates = [text, *(m.strip() for m in _FENCE.findall(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    candidates += [_CONTROL.sub(" ", c) for c in candidates if _CONTROL.search(c)]  # tried last
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):  # RecursionError: a reply nested thousands of levels deep
            continue
        if isinstance(value, dict):
            return value
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    raise ValueError(f"the reply is not valid JSON: {text[:80]!r}")


def _cut_off(response) -> bool:
    """Whether the server stopped the reply at max_tokens (finish_reason "length")."""
    choices = getattr(response, "choices", None)
    return bool(choices) and getattr(choices[0], "finish_reason", None) == "length"


def _validate(obj: dict, schema_check: Callable[[dict], object] | None) -> None:
    if schema_check is None:
        return
    try:
        verdict = schema_check(obj)
    except Exception as exc:  # the check's own way of saying no: ValueError, KeyError, ValidationError...
        raise ValueError(f"the reply does not match the expected shape: {exc}") from exc
    if verdict is False:
        raise ValueError("the reply does not match the expected shape")


def _reply_text(response) -> str | None:
    if not getattr(response, "choices", None):
        return None
    return response.choices[0].message.content


def _chat(client: openai.OpenAI, endpoint: str, messages: list[dict], schema: dict | None, step: str, **kwargs):
    """One request (and at most one resend per refused option): the response."""
    first = level = llm_formats.first_level(endpoint, schema)
    if (endpoint, kwargs["model"]) in _no_temperature:
        kwargs.pop("temperature", None)
    while True:
        extra = llm_formats.response_format(level, schema, step)
        try:
            with tracing.span("llm.chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": kwargs["model"],
                                           "loci.llm.json_mode": llm_formats.NAMES[level]}):
                response = client.chat.completions.create(messages=messages, **extra, **kwargs)
        except openai.APIStatusError as exc:
            said = _said(exc)
            # llama-cpp-python's server answers a response_format type it lacks with a 500 naming it.
            if exc.status_code not in _JSON_MODE_REJECTED and not (exc.status_code >= 500 and "response_format" in said):
                raise
            if llm_context.is_overflow(said):  # before JSON mode: the same 400, and resending cannot help
                raise _Overflow(said) from exc
            if "temperature" in kwargs and "temperature" in said.lower():
                logger.info("LLM %s refused temperature for %s (%s); sending none from now on",
                            endpoint, kwargs["model"], exc.status_code)
                kwargs.pop("temperature")
                with _lock:
                    _no_temperature.add((endpoint, kwargs["model"]))
                continue
            if level == llm_formats.PLAIN:
                raise
            logger.info("LLM server rejected response_format %s (%s); asking with %s", llm_formats.NAMES[level],
                        exc.status_code, llm_formats.NAMES[level + 1])
            level += 1
            continue
        llm_formats.worked(endpoint, first, level)  # remembered only once a lower level has worked
        return response


def _said(exc: openai.APIStatusError) -> str:
    """A refusal's message and error code (OpenAI puts "context_length_exceeded" in the code)."""
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
    return " ".join(str(part) for part in (exc.message, error.get("code") or "", error.get("param") or ""))


def _backoff(attempt: int, exc: Exception | None) -> float:
    base = float(getattr(settings, "LLM_BACKOFF_SECONDS", 1.0))
    delay = min(base * 2 ** (attempt - 1), _MAX_BACKOFF_SECONDS) * random.uniform(0.5, 1.0)  # jitter spreads workers
    retry_after = getattr(getattr(exc, "response", None), "headers", {}).get("retry-after") if exc else None
    try:
        delay = max(delay, min(float(retry_after), _MAX_RETRY_AFTER_SECONDS))
    except (TypeError, ValueError):
        pass
    return delay


def complete_json(
    messages: list[dict],
    *,
    schema_check: Callable[[dict], object] | None = None,
    max_attempts: int | None = None,
    model: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    step: str = "other",
    schema: dict | None = None,
) -> dict:
    """Ask the chat model for a JSON object and return it validated, or raise LlmError.

    `schema_check(obj)` rejects a reply by raising or returning False; a rejected or unparsable
    reply is retried with the model shown its mistake. `schema`, a JSON Schema of the reply, is sent
    where the server takes one (llm_formats): a decoder that follows it writes no other shape. A reply
    cut off at max_tokens is retried with twice the tokens and the model told to be brief. `max_attempts` defaults to
    LLM_MAX_RETRIES + 1; `max_tokens` to LLM_MAX_TOKENS. `step` names the caller in the metrics and
    the token ledger. An open breaker, a scope's passed deadline or a tenant's spent budget raises
    LlmError before anything is sent.
    """
    client = llm_client()
    if client is None:
        raise LlmError("no LLM is configured (set LOCI_LLM=1 and OPENAI_BASE_URL or OPENAI_API_KEY)")
    attempts = settings.LLM_MAX_RETRIES + 1 if max_attempts is None else max_attempts
    if attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {attempts}")
    endpoint = endpoint_of(client)
    breaker = breaker_for(endpoint, failures=settings.LLM_BREAKER_FAILURES,
                          cooldown=settings.LLM_BREAKER_COOLDOWN_SECONDS)
    kwargs = {"model": model or settings.LLM_MODEL, "max_tokens": max_tokens or settings.LLM_MAX_TOKENS}
    if temperature is not None:
        kwargs["temperature"] = temperature
    # What the prompt may take of the window: the rest is the reply's (max_tokens).
    window = max(256, settings.LLM_CONTEXT_TOKENS - kwargs["max_tokens"])
    messages = llm_context.fit_messages(messages, window)
    call = _Call(client, endpoint, breaker, step, schema)

    conversation = list(messages)
    problem = ""
    for attempt in range(1, attempts + 1):
        error: Exception | None = None
        try:
            response = call.send(llm_context.fit_messages(conversation, window), kwargs, problem)
            text = _reply_text(response)
        except _Transient as exc:
            error, problem = exc.__cause__, str(exc)
        else:
            try:
                obj = parse_json_reply(text)
                _validate(obj, schema_check)
                return obj
            except ValueError as exc:
                problem = str(exc)
                if _cut_off(response):  # its JSON never closed: echoing it would only cost tokens
                    problem = f"the reply was cut off at max_tokens ({kwargs['max_tokens']}) before its JSON closed"
                    kwargs["max_tokens"] = max(kwargs["max_tokens"], min(2 * kwargs["max_tokens"],
                                                                         settings.LLM_CONTEXT_TOKENS // 2))
                    window = max(256, settings.LLM_CONTEXT_TOKENS - kwargs["max_tokens"])
                    conversation = [*messages, {"role": "user", "content": _CUT_OFF_NOTE}]
                else:
                    conversation = [
                        *messages,
                        {"role": "assistant", "content": (text or "")[:_ECHO_CHARS]},
                        {"role": "user", "content": f"That reply was not usable: {exc}. Answer again with only the JSON object."},
                    ]
        if attempt < attempts:
            delay = _backoff(attempt, error)
            left = llm_scope.seconds_left()
            if left is not None and left <= delay:
                metrics.LLM_CALLS.labels(step, "deadline").inc()
                raise LlmError(f"the LLM steps' deadline passed after {attempt} attempts: {problem}")
            logger.warning("LLM attempt %d/%d failed (%s); retrying in %.2fs", attempt, attempts, problem, delay)
            time.sleep(delay)
    raise LlmError(f"no usable JSON from the LLM after {attempts} attempts: {problem}")


class _Transient(Exception):
    """A request worth another attempt (timeout, unreachable, 408/409/429, 5xx); its cause is the error."""


class _Call:
    """One step's requests to one endpoint: what may be sent, and what each cost and said."""

    def __init__(self, client, endpoint: str, breaker, step: str, schema: dict | None = None):
        self.client, self.endpoint, self.breaker, self.step, self.schema = client, endpoint, breaker, step, schema

    def send(self, messages: list[dict], kwargs: dict, problem: str):
        """The response, or LlmError (not worth retrying, or not sent at all), or _Transient."""
        timeout = self._may_send(problem)
        started = time.perf_counter()
        try:
            response = _chat(self.client, self.endpoint, messages, self.schema, self.step, timeout=timeout, **kwargs)
        except _Overflow as exc:
            self._answered(started, error="overflow")  # the endpoint is up; the prompt does not fit
            raise LlmError(f"the prompt exceeds the model's context ({exc}); set LLM_CONTEXT_TOKENS to its "
                           "window") from None
        except openai.APIStatusError as exc:
            if exc.status_code not in _TRANSIENT_STATUSES and exc.status_code < 500:
                self._answered(started, error="http_4xx")
                raise LlmError(f"the LLM server refused the request ({exc.status_code}): {exc.message}") from exc
            self._failed(started, "http_429" if exc.status_code == 429 else "http_5xx")
            raise _Transient(f"HTTP {exc.status_code}") from exc
        except openai.APIConnectionError as exc:  # includes APITimeoutError
            self._failed(started, "timeout" if isinstance(exc, openai.APITimeoutError) else "connection")
            raise _Transient(type(exc).__name__) from exc
        self._answered(started)
        prompt_tokens, completion_tokens = llm_usage.tokens_of(response)
        metrics.LLM_TOKENS.labels(self.step, "prompt").inc(prompt_tokens)
        metrics.LLM_TOKENS.labels(self.step, "completion").inc(completion_tokens)
        llm_usage.record(self.step, prompt_tokens, completion_tokens)
        return response

    def _may_send(self, problem: str) -> float:
        """This request's timeout (LLM_TIMEOUT, or the scope's time left), or LlmError: not sent."""
        left = llm_scope.seconds_left()
        if left is not None and left <= 0:
            self._skipped("deadline")
            raise LlmError(f"the LLM steps' deadline passed{f' ({problem})' if problem else ''}: the rules answer")
        over = llm_usage.spent_budget()
        if over:
            self._skipped("budget")
            tenant_id = llm_scope.current().tenant_id
            logger.warning("tenant %s has used its LLM token budget for today (%d of LLM_TOKEN_BUDGET %d): "
                           "the %s step uses the rules", tenant_id, over[0], over[1], self.step)
            raise LlmError(f"tenant {tenant_id}'s LLM token budget for today is spent ({over[0]} of {over[1]})")
        # Last: a half-open breaker's one trial goes to a call that is then sent.
        if not self.breaker.allow():
            self._skipped("breaker_open")
            raise LlmError(f"the LLM endpoint {self.endpoint} is failing (circuit open for "
                           f"{self.breaker.seconds_open():.0f}s after {self.breaker.threshold} failures): the rules answer")
        return float(settings.LLM_TIMEOUT) if left is None else min(float(settings.LLM_TIMEOUT), left)

    def _skipped(self, outcome: str) -> None:
        metrics.LLM_CALLS.labels(self.step, outcome).inc()

    def _answered(self, started: float, *, error: str = "") -> None:
        metrics.LLM_SECONDS.labels(self.step).observe(time.perf_counter() - started)
        metrics.LLM_CALLS.labels(self.step, "error" if error else "ok").inc()
        if error:
            metrics.LLM_ERRORS.labels(self.step, error).inc()
        self.breaker.succeeded()
        metrics.LLM_BREAKER_OPEN.labels(self.endpoint).set(0)

    def _failed(self, started: float, kind: str) -> None:
        metrics.LLM_SECONDS.labels(self.step).observe(time.perf_counter() - started)
        metrics.LLM_CALLS.labels(self.step, "error").inc()
        metrics.LLM_ERRORS.labels(self.step, kind).inc()
        if self.breaker.failed():
            metrics.LLM_BREAKER_OPEN.labels(self.endpoint).set(1)
            logger.warning("LLM endpoint %s failed %d times in a row: circuit open for %.0fs, the rules answer",
                           self.endpoint, self.breaker.threshold, self.breaker.cooldown)
