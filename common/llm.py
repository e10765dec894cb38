"""The one chat-model client: any OpenAI-compatible endpoint, JSON replies, bounded retries.

`complete_json()` asks for a JSON object (with `response_format` when the server accepts it),
parses it even when wrapped in ```json fences or preceded by a <think> block, validates it with the
caller's check, and retries malformed replies, timeouts, 429 and 5xx with exponential backoff.
The `openai` client's own retries are off (`max_retries=0`) so this loop is the only one.

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

from common import tracing
from common.backends import DEFAULT_ALIAS, llm_clients

logger = logging.getLogger(__name__)

# Statuses worth retrying: timeouts, conflicts and rate limits clear up, 5xx are the server's fault.
_TRANSIENT_STATUSES = {408, 409, 429}
# A server without JSON mode answers 400 (vLLM, OpenAI for unsupported models) or 422 (some proxies).
_JSON_MODE_REJECTED = {400, 422}
_MAX_BACKOFF_SECONDS = 30.0
_MAX_RETRY_AFTER_SECONDS = 60.0
# Enough of a bad reply for the model to see its mistake without re-sending a long essay.
_ECHO_CHARS = 2000

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.S)
_THINK = re.compile(r"<think>.*?</think>", re.S)

_lock = threading.Lock()
_plain_only: set[tuple] = set()  # client keys whose server rejected response_format


class LlmError(Exception):
    """The chat model gave no usable answer within the allowed attempts (or refused the request)."""


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


def reset_llm_client() -> None:
    llm_clients.reset()
    with _lock:
        _plain_only.clear()


def parse_json_reply(text: str | None) -> dict:
    """The JSON object in a model reply: bare, fenced in ```json, or the outermost {...}; else ValueError."""
    if not text or not text.strip():
        raise ValueError("the reply is empty")
    text = _THINK.sub("", text).strip()
    candidates = [text, *(m.strip() for m in _FENCE.findall(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):  # RecursionError: a reply nested thousands of levels deep
            continue
        if isinstance(value, dict):
            return value
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    raise ValueError(f"the reply is not valid JSON: {text[:80]!r}")


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


def _create(client: openai.OpenAI, messages: list[dict], **kwargs) -> str | None:
    """One request to the chat model: one span (a refusal or a timeout is recorded on it)."""
    with tracing.span("llm.chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": kwargs.get("model", ""),
                                   "loci.llm.json_mode": "response_format" in kwargs}):
        return _reply_text(client.chat.completions.create(messages=messages, **kwargs))


def _chat(client: openai.OpenAI, messages: list[dict], **kwargs) -> str | None:
    key = _client_key()
    if key not in _plain_only:
        try:
            return _create(client, messages, response_format={"type": "json_object"}, **kwargs)
        except openai.APIStatusError as exc:
            if exc.status_code not in _JSON_MODE_REJECTED:
                raise
            logger.info("LLM server rejected response_format (%s); retrying as a plain prompt", exc.status_code)
        text = _create(client, messages, **kwargs)
        _plain_only.add(key)  # remembered only once a plain request has worked
        return text
    return _create(client, messages, **kwargs)


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
) -> dict:
    """Ask the chat model for a JSON object and return it validated, or raise LlmError.

    `schema_check(obj)` rejects a reply by raising or returning False; a rejected or unparsable
    reply is retried with the model shown its mistake. `max_attempts` defaults to
    LLM_MAX_RETRIES + 1.
    """
    client = llm_client()
    if client is None:
        raise LlmError("no LLM is configured (set OPENAI_BASE_URL or OPENAI_API_KEY)")
    attempts = settings.LLM_MAX_RETRIES + 1 if max_attempts is None else max_attempts
    if attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {attempts}")
    kwargs = {"model": model or settings.LLM_MODEL}
    if temperature is not None:
        kwargs["temperature"] = temperature
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens

    conversation = list(messages)
    problem = ""
    for attempt in range(1, attempts + 1):
        error: Exception | None = None
        try:
            text = _chat(client, conversation, **kwargs)
        except openai.APIStatusError as exc:
            if exc.status_code not in _TRANSIENT_STATUSES and exc.status_code < 500:
                raise LlmError(f"the LLM server refused the request ({exc.status_code}): {exc.message}") from exc
            error, problem = exc, f"HTTP {exc.status_code}"
        except openai.APIConnectionError as exc:  # includes APITimeoutError
            error, problem = exc, type(exc).__name__
        else:
            try:
                obj = parse_json_reply(text)
                _validate(obj, schema_check)
                return obj
            except ValueError as exc:
                problem = str(exc)
                conversation = [
                    *messages,
                    {"role": "assistant", "content": (text or "")[:_ECHO_CHARS]},
                    {"role": "user", "content": f"That reply was not usable: {exc}. Answer again with only the JSON object."},
                ]
        if attempt < attempts:
            delay = _backoff(attempt, error)
            logger.warning("LLM attempt %d/%d failed (%s); retrying in %.2fs", attempt, attempts, problem, delay)
            time.sleep(delay)
    raise LlmError(f"no usable JSON from the LLM after {attempts} attempts: {problem}")
