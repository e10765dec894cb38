"""The OpenAPI schema says what the API does: typed bodies, real examples, the error shape; and the checker
that holds the API tests' responses to it (tests/schema_check.py) catches a response that strays."""

import jsonschema
import pytest

from tests.conftest import api_client
from tests.schema_check import SchemaMismatch, _components, _strict, openapi, operation_for, validate


def _json_schema(path, method, status):
    return operation_for(path, method)["responses"][str(status)]["content"]["application/json"]["schema"]


def _resolved(schema):
    return openapi()["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]


def test_search_request_and_response_are_typed(db):
    operation = operation_for("/api/v1/memories/search", "post")
    request = _resolved(operation["requestBody"]["content"]["application/json"]["schema"])
    assert {"query", "method", "filters", "top_k", "memory_types", "neighbours"} <= set(request["properties"])
    response = _resolved(_json_schema("/api/v1/memories/search", "post", 200))
    assert set(response["properties"]) == {"episodes", "facts", "chunks", "profiles", "raw_messages", "agent_memory",
                                           "query"}
    episode = _resolved(response["properties"]["episodes"]["items"])
    assert {"summary", "atomic_facts", "sources", "score"} <= set(episode["properties"])
    assert set(operation["responses"]) >= {"200", "400", "401", "403", "429", "503", "504"}


def test_an_upload_answers_a_plain_list_and_the_memories_list_is_paginated(db):
    upload = _json_schema("/api/v1/documents", "post", 201)
    assert upload["type"] == "array" and upload["items"]["$ref"].endswith("/UploadResult")
    listed = _resolved(_json_schema("/api/v1/memories", "get", 200))
    assert {"count", "next", "previous", "results"} <= set(listed["properties"])
    assert listed["properties"]["results"]["items"]["$ref"].endswith("/Memory")


def test_every_error_answer_is_the_error_shape(db):
    for path, item in openapi()["paths"].items():
        for method, operation in item.items():
            for code in ("400", "401", "403", "404", "429"):
                schema = operation["responses"][code]["content"]["application/json"]["schema"]
                assert schema["$ref"].endswith("/Error"), (method, path, code)
    assert set(openapi()["components"]["schemas"]["Error"]["required"]) == {"error", "detail"}


def test_the_examples_match_their_own_schemas(db):
    checked = 0
    for path, item in openapi()["paths"].items():
        for method, operation in item.items():
            bodies = [operation.get("requestBody", {}).get("content", {})]
            bodies += [r.get("content", {}) for r in operation["responses"].values()]
            for content in bodies:
                media = content.get("application/json", {})
                for name, example in media.get("examples", {}).items():
                    root = {"allOf": [_strict(media["schema"])], "components": _components()}
                    jsonschema.Draft202012Validator(root).validate(example["value"])
                    checked += 1
    assert checked >= 3  # the search request examples and its response example


def test_the_checker_refuses_a_response_that_strays_from_the_schema(db):
    with pytest.raises(SchemaMismatch, match="'took_ms' is a required property"):
        validate("/api/v1/memories/search", "post", 200, {"episodes": [], "facts": [], "chunks": [], "profiles": [],
                                                           "raw_messages": [], "query": {"text": "q", "method": "hybrid",
                                                           "answered_by": "hybrid", "filters_applied": {},
                                                           "llm": False, "notes": []}})
    with pytest.raises(SchemaMismatch, match="'extra' was unexpected"):
        validate("/api/v1/tenants", "get", 200, [{"id": 1, "slug": "a", "name": "A", "isolation": "shared",
                                                   "created_at": "2026-01-01T00:00:00Z", "extra": 1}])
    with pytest.raises(SchemaMismatch, match="does not list"):
        validate("/api/v1/tenants", "get", 418, {"error": "teapot", "detail": "teapot"})


def test_the_fixture_checks_what_a_view_really_answers(world, api_schema_check, monkeypatch):
    from tenants.api import views

    original = views.TenantSerializer.to_representation
    monkeypatch.setattr(views.TenantSerializer, "to_representation",
                        lambda self, obj: {**original(self, obj), "undocumented": True})
    with pytest.raises(SchemaMismatch, match="'undocumented' was unexpected"):
        api_client(world.alice_key).get("/api/v1/tenants")
