"""The search page's one ranked list: episodes, facts and chunks mixed in the API's order."""

from console.search import ranked


def test_items_of_every_kind_are_mixed_by_score_with_their_kind():
    response = {"episodes": [{"id": "e", "score": 0.5}], "facts": [{"id": "f", "score": 0.9}],
                "chunks": [{"id": "c1", "score": 0.7}, {"id": "c2", "score": 0.1}]}
    assert [(i["id"], i["kind"]) for i in ranked(response)] == [
        ("f", "fact"), ("c1", "chunk"), ("e", "episode"), ("c2", "chunk")]


def test_the_apis_rank_wins_over_the_score_when_every_item_has_one():
    response = {"episodes": [{"id": "e", "score": 0.5, "rank": 0}], "facts": [{"id": "f", "score": 0.9, "rank": 2}],
                "chunks": [{"id": "c", "score": 0.7, "rank": 1}]}
    assert [i["id"] for i in ranked(response)] == ["e", "c", "f"]
