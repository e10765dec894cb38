"""Every JSON response of /api/v1/ in a test, validated against the OpenAPI schema drf-spectacular serves.

Enable it in a test module with `pytestmark = pytest.mark.usefixtures("api_schema_check")`: each
response of rest_framework's APIClient is then checked for its path, method and status. Stricter than
the schema as served in one way, on purpose: an object may not carry properties the schema does not
name (additionalProperties: false unless it says otherwise), so an undocumented field fails too.
"""

import copy
import json
import re
from functools import lru_cache

import jsonschema
import pytest

API_PREFIX = "/api/v1/"


class SchemaMismatch(AssertionError):
    pass


@lru_cache(maxsize=1)
def openapi() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(json.dumps(schema, default=str))  # lazy strings and the like, as served


@lru_cache(maxsize=1)
def _operations() -> list[tuple[re.Pattern, str, dict]]:
    ops = []
    for template, item in openapi()["paths"].items():
        # Routes accept both /x and /x/ (trailing_slash "/?"); ids are one path segment.
        pattern = re.escape(template.rstrip("/")).replace(r"\{", "{").replace(r"\}", "}")
        pattern = re.sub(r"{[^}]+}", r"[^/]+", pattern)
        for method, operation in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                ops.append((re.compile(f"^{pattern}/?$"), method, operation))
    return ops


def operation_for(path: str, method: str) -> dict:
    for pattern, op_method, operation in _operations():
        if op_method == method.lower() and pattern.match(path):
            return operation
    raise SchemaMismatch(f"{method.upper()} {path} is not in the OpenAPI schema")


def response_schema(path: str, method: str, status: int) -> dict | None:
    """The JSON schema of that response; None when the schema says it has no body (204)."""
    responses = operation_for(path, method)["responses"]
    response = responses.get(str(status)) or responses.get("default")
    if response is None:
        raise SchemaMismatch(f"{method.upper()} {path} answered {status}, which the schema does not list "
                             f"(it lists {', '.join(sorted(responses))})")
    content = response.get("content")
    if not content:
        return None
    if "application/json" not in content:
        raise SchemaMismatch(f"{method.upper()} {path} {status} answered JSON; the schema says {sorted(content)}")
    return content["application/json"]["schema"]


def _strict(node):
    """OpenAPI 3.0 → JSON Schema 2020-12: nullable as a null type, closed objects."""
    if isinstance(node, list):
        return [_strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _strict(v) for k, v in node.items()}
    if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
        node["additionalProperties"] = False
    if node.pop("nullable", False):
        node = {"anyOf": [node, {"type": "null"}]}
    return node


@lru_cache(maxsize=1)
def _components() -> dict:
    return _strict(copy.deepcopy(openapi().get("components", {})))


def validate(path: str, method: str, status: int, body) -> None:
    schema = response_schema(path, method, status)
    if schema is None:
        if body not in (None, b"", ""):
            raise SchemaMismatch(f"{method.upper()} {path} {status} has a body; the schema says none")
        return
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "allOf": [_strict(schema)],
            "components": _components()}
    validator = jsonschema.Draft202012Validator(root, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
    if errors:
        where = "; ".join(f"at {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:5])
        raise SchemaMismatch(f"{method.upper()} {path} {status} does not match the schema: {where}")


def check_response(request_kwargs: dict, response) -> None:
    path = request_kwargs.get("PATH_INFO", "")
    if not path.startswith(API_PREFIX) or getattr(response, "streaming", False):
        return
    method = request_kwargs.get("REQUEST_METHOD", "GET")
    if response.status_code == 204:
        validate(path, method, 204, response.content or None)
        return
    if not response.get("Content-Type", "").startswith("application/json"):
        if response.status_code >= 400 and response.status_code != 405:
            raise SchemaMismatch(f"{method} {path} {response.status_code} is not JSON: {response.content[:200]!r}")
        return
    validate(path, method, response.status_code, json.loads(response.content))


@pytest.fixture
def api_schema_check(monkeypatch):
    """Validate every APIClient response under /api/v1/ against the schema (raises SchemaMismatch)."""
    from rest_framework.test import APIClient

    original = APIClient.request

    def checked(self, **kwargs):
        response = original(self, **kwargs)
        check_response(kwargs, response)
        return response

    monkeypatch.setattr(APIClient, "request", checked)
