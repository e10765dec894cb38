import pytest

from retrieval.request import SearchError, parse_search_request


@pytest.mark.parametrize(
    "body, message",
    [
        ({}, "'query' must be a non-empty string"),
        ({"query": "   "}, "'query' must be a non-empty string"),
        ({"query": "x", "method": "magic"}, "Unknown method 'magic'"),
        ({"query": "x", "top_k": 0}, "'top_k' must be an integer from 1 to 100"),
        ({"query": "x", "top_k": 101}, "'top_k' must be an integer from 1 to 100"),
        ({"query": "x", "top_k": "10"}, "'top_k' must be an integer"),
        ({"query": "x", "top_k": True}, "'top_k' must be an integer"),
        ({"query": "x", "memory_types": ["episode", "gossip"]}, "'memory_types' must be a list"),
        ({"query": "x", "filters": {"tenant_id": 2}}, "Unknown filter(s) ['tenant_id']"),
        ({"query": "x", "filters": {"document_id": ["1 or 1=1"]}}, "'filters.document_id' must be a list of integers"),
        ({"query": "x", "filters": {"user_id": {"$ne": ""}}}, "'filters.user_id' must be a string"),
        ({"query": "x" * 2001}, "longer than 2000"),
    ],
)
def test_it_rejects_bad_requests_with_a_clear_message(body, message):
    with pytest.raises(SearchError) as exc:
        parse_search_request(body)
    assert message in str(exc.value)


def test_it_fills_defaults():
    req = parse_search_request({"query": " who? "})
    assert (req.query, req.method, req.top_k, req.memory_types) == ("who?", "hybrid", 10, ["episode", "atomic_fact"])


def test_minus_one_means_everything_above_the_floor():
    req = parse_search_request({"query": "x", "method": "vector", "top_k": -1})
    assert req.top_k == -1 and req.limit == 100


def test_filters_are_normalised():
    req = parse_search_request({"query": "x", "filters": {"kb": "docs", "document_id": [3, "4"], "user_id": "u1"}})
    assert req.filters == {"kb": ["docs"], "document_id": [3, 4], "user_id": "u1"}
