"""The OpenAPI schema as a new integrator reads it (issue 29): tags per resource, every filter, one slash
rule, JSON in a browser, and no warnings when it is generated."""

import json
import uuid

from django.core.management import call_command
from django.test import Client
from django.urls import resolve

from tests.schema_check import openapi

SAMPLE = {"{id}": "1", "{slug}": "docs", "{key_id}": "0123456789ab", "{user_id}": "u1"}


def operations():
    for path, item in openapi()["paths"].items():
        for method, operation in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                yield path, method, operation


def test_each_operation_is_tagged_with_its_resource():
    tags = {path: operation["tags"] for path, _, operation in operations()}
    assert all(len(t) == 1 and t != ["v1"] for t in tags.values()), tags
    assert tags["/api/v1/documents"] == ["documents"] and tags["/api/v1/keys/{key_id}"] == ["keys"]
    assert tags["/api/v1/memories/{id}/history"] == ["memories"]
    assert tags["/api/v1/knowledge-bases"] == ["knowledge-bases"]


def test_the_documents_list_documents_its_filters():
    parameters = openapi()["paths"]["/api/v1/documents"]["get"]["parameters"]
    assert {p["name"] for p in parameters if p["in"] == "query"} == {"kb", "status", "type", "q", "page"}


def test_every_path_is_written_without_a_trailing_slash_and_answers_both_ways():
    for path, _, operation in operations():
        assert not path.endswith("/"), path
        concrete = path
        for placeholder, value in SAMPLE.items():
            concrete = concrete.replace(placeholder, value)
        if "/memories/" in path and "{id}" in path:
            concrete = path.replace("{id}", str(uuid.uuid4()))
        for form in (concrete, concrete + "/"):
            match = resolve(form)
            assert match.url_name not in (None, ""), form


def test_the_schema_opens_in_a_browser_as_json():
    response = Client().get("/api/schema/?format=json", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert json.loads(response.content)["openapi"].startswith("3.")


def test_generating_the_schema_warns_about_nothing(tmp_path, capsys):
    call_command("spectacular", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "Warning" not in capsys.readouterr().err
