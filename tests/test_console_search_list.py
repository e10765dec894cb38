"""The search page's one ranked list: episodes, facts and chunks mixed in the API's order."""

from console.search import _decorate, ranked


def test_items_of_every_kind_are_mixed_by_score_with_their_kind():
    response = {"episodes": [{"id": "e", "score": 0.5}], "facts": [{"id": "f", "score": 0.9}],
                "chunks": [{"id": "c1", "score": 0.7}, {"id": "c2", "score": 0.1}]}
    assert [(i["id"], i["kind"]) for i in ranked(response)] == [
        ("f", "fact"), ("c1", "chunk"), ("e", "episode"), ("c2", "chunk")]


def test_the_apis_rank_wins_over_the_score_when_every_item_has_one():
    response = {"episodes": [{"id": "e", "score": 0.5, "rank": 0}], "facts": [{"id": "f", "score": 0.9, "rank": 2}],
                "chunks": [{"id": "c", "score": 0.7, "rank": 1}]}
    assert [i["id"] for i in ranked(response)] == ["e", "c", "f"]


def test_the_page_renders_one_mixed_list_the_weak_notice_and_the_request_as_curl(world, monkeypatch):
    """The template over a fixed response (the search itself is tested in test_console_pages)."""
    import shlex

    from django.test import Client

    def answer(scope, request):
        return {"query": {"took_ms": 3, "method": "hybrid", "answered_by": "hybrid", "filters_applied": {},
                          "notes": [], "weak": True},
                "episodes": [{"id": "e", "summary": "the episode text", "score": 0.2}],
                "facts": [{"id": "f", "atomic_fact": "the fact text", "score": 0.9}],
                "chunks": [{"id": "c", "text": "the chunk text", "score": 0.5}]}

    monkeypatch.setattr("console.search.search", answer)
    client = Client()
    client.force_login(world.alice)
    body = client.get("/search/?q=budget&method=hybrid&chunks=1").content.decode()
    assert body.index("the fact text") < body.index("the chunk text") < body.index("the episode text")
    assert body.count('class="kind kind-') == 3
    assert "Nothing answers this well" in body
    curl = body.split("data-curl>", 1)[1].split("</code>", 1)[0]
    import html
    args = shlex.split(html.unescape(curl))
    assert args[:4] == ["curl", "-X", "POST", "http://testserver/api/v1/memories/search"]
    assert '"memory_types": ["episode", "atomic_fact", "chunk"]' in args[-1] and "X-Loci-Tenant: acme" in args


def test_the_why_view_ends_on_the_cards_score():
    """Issue 38: a fact's "why" said final 0.2798 while its badge said 0.054, with nothing between.
    The search's trail names every step; a nested fact, which has none, says where its number is from."""
    response = {"facts": [
        {"atomic_fact": "moved", "score": 0.061, "scores": {"fused": 0.4279, "final": 0.2798},
         "trail": [{"stage": "retrieve", "score": 0.054}, {"stage": "tense", "score": 0.061}]},
    ], "episodes": [{"summary": "e", "score": 0.2, "scores": {"final": 0.2},
                     "atomic_facts": [{"atomic_fact": "nested", "score": 0.05, "scores": {"fused": 0.4, "final": 0.3}},
                                      {"atomic_fact": "same", "score": 0.3, "scores": {"final": 0.3}}]}]}
    decorated = _decorate(response, [])
    moved = decorated["facts"][0]
    assert [row[:2] for row in moved["why"]] == [("fused", 0.4279), ("final", 0.2798), ("→ retrieve", 0.054),
                                                 ("→ tense", 0.061)]
    assert "calibrated" in moved["why"][2][2] and "used to" in moved["why"][3][2]  # each step says what it does
    nested, same = decorated["episodes"][0]["atomic_facts"]
    assert nested["why"][-1][:2] == ("shown", 0.05)
    assert [row[0] for row in same["why"]] == ["final"]  # nothing to explain: no extra row
