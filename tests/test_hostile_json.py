"""Hostile JSON bodies get a 4xx with a reason on every JSON endpoint, never a 500."""

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.usefixtures("api_schema_check")  # every response matches the OpenAPI schema

SEARCH = "/api/v1/memories/search"
ENDPOINTS = [SEARCH, "/api/v1/memories", "/api/v1/knowledge-bases"]

HOSTILE = {
    "NaN": (b'{"query": "x", "top_k": NaN}', "NaN"),
    "Infinity": (b'{"query": "x", "filters": {"document_id": [Infinity]}}', "Infinity"),
    "-Infinity": (b'{"query": "x", "top_k": -Infinity}', "Infinity"),
    "deep": (b'{"query": "x", "filters": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested"),
    "deep-500": (b'{"query": "x", "filters": {"kb": ' + b"[" * 500 + b"]" * 500 + b"}}", "nested"),
    "bad-utf8": (b'{"query": "caf\xe9 \xff\xfe"}', "UTF-8"),
    "lone-surrogate": (b'{"query": "x\\ud800y"}', "surrogate"),
    "nul": (b'{"query": "x", "filters": {"user_id": "a\\u0000b"}}', "NUL"),
    "not-json": (b'{"query": ', "JSON"),
}


@pytest.fixture
def client(world):
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.alice_key}")
    return client


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("path", ENDPOINTS)
def test_hostile_json_is_refused_with_a_reason(client, path, name):
    body, reason = HOSTILE[name]
    response = client.generic("POST", path, body, content_type="application/json")
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert reason in response.json()["error"]


@pytest.mark.parametrize("ids, reason", [
    ([2**63], "from 1 to"),
    ([10**30], "from 1 to"),
    ([-1], "from 1 to"),
    ([0], "from 1 to"),
    (["99999999999999999999999"], "from 1 to"),
    ([1.5], "list of integers"),
])
def test_document_ids_outside_the_database_range_are_refused(client, ids, reason):
    response = client.post(SEARCH, {"query": "x", "filters": {"document_id": ids}}, format="json")
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert reason in response.json()["error"]


@pytest.mark.parametrize("key", ["group_id", "agent_id", "run_id"])
def test_scope_filters_are_accepted_and_echoed(client, key):
    response = client.post(SEARCH, {"query": "x", "filters": {key: "team-a"}}, format="json")
    assert response.status_code == 200
    assert response.json()["query"]["filters_applied"][key] == "team-a"


@pytest.mark.parametrize("filters,reason", [
    ({"team_id": "a"}, "Unknown filter(s) ['team_id']"),
    ({"agent_id": 7}, "'filters.agent_id' must be a string"),
    ({"metadata": {'x") or 1==1 or ("': "a"}}, "keys must start with a letter"),
    ({"metadata": {"a.b": "a"}}, "keys must start with a letter"),
    ({"metadata": {"tag": {"$ne": "a"}}}, "takes the operators"),
    ({"metadata": {"tag": {"gte": "3"}}}, "'filters.metadata.tag.gte' must be a number"),
    ({"metadata": {"tag": True}}, "values must be strings or numbers"),
    ({"metadata": {"tag": {"x": 1}}}, "takes the operators"),
    ({"metadata": {"tag": []}}, "lists 1 to 50 values"),
    ({"metadata": []}, "'filters.metadata' must be a non-empty object"),
])
def test_bad_scope_and_metadata_filters_get_a_reason(client, filters, reason):
    response = client.post(SEARCH, {"query": "x", "filters": filters}, format="json")
    assert response.status_code == 400
    assert reason in response.json()["error"]


def test_an_oversized_json_body_is_refused(client, settings):
    settings.LOCI_MAX_JSON_BYTES = 1000
    response = client.generic("POST", SEARCH, b'{"query": "' + b"x" * 2000 + b'"}', content_type="application/json")
    assert response.status_code == 413
    assert "the limit is" in response.json()["error"]


def test_console_status_ids_beyond_64_bits_match_nothing(world):
    client = APIClient(raise_request_exception=False)
    client.force_login(world.alice)
    response = client.get("/documents/status.json?ids=99999999999999999999999,1")
    assert response.status_code == 200 and response.json() == {"documents": []}


@pytest.mark.parametrize("path", ["/api/v1/export?user_id=%00", "/api/v1/memories?user_id=a%00b",
                                  "/api/v1/documents?q=%00", "/api/v1/knowledge-bases?x%00=1"])
def test_a_nul_in_a_query_parameter_is_refused_with_a_reason(client, path):
    response = client.get(path)
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert "NUL" in response.json()["error"]


@pytest.mark.parametrize("path", ["/api/v1/memories", "/api/v1/documents"])
@pytest.mark.parametrize("kb", ["secret", "nope"])  # another tenant's, and none at all
def test_a_knowledge_base_the_key_may_not_read_is_refused_by_every_list(client, path, kb):
    response = client.get(path, {"kb": kb})
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert response.json()["error"] == f"kb: Unknown knowledge base '{kb}'."
