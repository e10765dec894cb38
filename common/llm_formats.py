"""How a JSON reply is asked for, most constrained first, and where each endpoint starts.

1. `json_schema` with the step's JSON Schema: OpenAI's structured outputs, vLLM, Ollama, llama.cpp's
   llama-server — a decoder that follows the schema cannot write another shape;
2. `json_object` with a `schema` key: llama-cpp-python's server and Anyscale-style endpoints, which
   refuse (422) the first but turn this one into a grammar;
3. `json_object`: any JSON object (JSON mode);
4. no `response_format`: the prompt alone asks for JSON.

A call without a schema starts at 3. A server that refuses one (400 or 422, other than an overflow or
a temperature) is asked the next; once a lower one has worked, the endpoint starts there from then
on. Measured with SmolLM2-135M on llama-cpp-python (bench/RESULTS.md, "A real model"): without the
schema the model's JSON mode wrote objects of the wrong shape or ran to max_tokens repeating itself.
"""

import re
import threading

JSON_SCHEMA, OBJECT_SCHEMA, JSON_OBJECT, PLAIN = range(4)
NAMES = ("json_schema", "json_object+schema", "json_object", "plain")

_lock = threading.Lock()
_start: dict[str, int] = {}  # endpoint -> the first level it has not refused


def first_level(endpoint: str, schema: dict | None) -> int:
    with _lock:
        known = _start.get(endpoint, JSON_SCHEMA)
    return known if schema is not None else max(known, JSON_OBJECT)


def response_format(level: int, schema: dict | None, name: str) -> dict:
    """The request's extra fields for `level`."""
    if level == JSON_SCHEMA:
        # strict off: OpenAI's strict mode refuses schemas with optional properties or maxItems.
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "reply", "schema": schema, "strict": False}}}
    if level == OBJECT_SCHEMA:
        return {"response_format": {"type": "json_object", "schema": schema}}
    if level == JSON_OBJECT:
        return {"response_format": {"type": "json_object"}}
    return {}


def worked(endpoint: str, first: int, level: int) -> None:
    """A request at `level` was answered after the levels from `first` were refused: start there."""
    if level > first:
        with _lock:
            _start[endpoint] = max(_start.get(endpoint, JSON_SCHEMA), level)


def reset() -> None:
    with _lock:
        _start.clear()
