"""A list of k items brings as much distinct evidence as it can: a fact repeating only messages the
facts above it cite gives way to one citing a new message (retrieval/search/coverage.py)."""

from retrieval.search.coverage import demote_covered


def fact(name, score, *messages):
    return {"id": name, "score": score, "scores": {},
            "sources": [{"type": "message", "message_id": m, "session_id": "s1"} for m in messages]}


def test_a_fact_of_an_already_cited_message_falls_below_one_of_a_new_message():
    response = {"facts": [fact("a", 0.9, "m1"), fact("b", 0.8, "m1"), fact("c", 0.7, "m2"), fact("d", 0.6)],
                "episodes": [{"id": "e", "score": 0.95, "scores": {},
                              "sources": [{"type": "message", "message_id": "m2", "session_id": "s1"}]}]}

    assert demote_covered(response, 0.5) == 1

    assert [f["id"] for f in response["facts"]] == ["a", "c", "d", "b"]  # c is not covered: episodes don't count
    assert response["facts"][-1]["scores"]["covered"] == 0.5 and response["facts"][-1]["score"] == 0.4


def test_weight_one_is_off_and_a_fact_without_message_sources_is_never_covered():
    response = {"facts": [fact("a", 0.9, "m1"), fact("b", 0.8, "m1"), fact("x", 0.7), fact("y", 0.6)]}
    assert demote_covered(response, 1.0) == 0
    assert [f["id"] for f in response["facts"]] == ["a", "b", "x", "y"]
    assert demote_covered(response, 0.0) == 1
    assert [f["id"] for f in response["facts"]] == ["a", "x", "y", "b"]
