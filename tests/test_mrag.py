"""Pins the mRAG expansion algorithm and the fusion functions."""

import math

import pytest

from retrieval.search.mrag import blend
from retrieval.search.scoring import logistic_relevance, rrf
from retrieval.search.mrag import Candidate, EpisodeExpander, MragParams


def ep(id, score):
    return Candidate(id, "episode", score)


def fact(id, score):
    return Candidate(id, "atomic_fact", score)


def scorer(table, calls=None):
    def score(episode_ids):
        if calls is not None:
            calls.append(list(episode_ids))
        return {e: table.get(e, []) for e in episode_ids}

    return score


def test_rrf_matches_the_formula():
    fused = rrf([["a", "b"], ["b", "c"]], k=60)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["a"] == pytest.approx(1 / 61)
    assert max(fused, key=fused.get) == "b"


def test_logistic_relevance_uses_the_everos_weights():
    assert logistic_relevance(0.8, 10.0) == pytest.approx(1 / (1 + math.exp(-(6.2747 * 0.8 + 0.09395 * 10 - 4.8581))))
    assert logistic_relevance(0.9, 5) > logistic_relevance(0.5, 5)


def test_alpha_blends_fact_and_episode_scores():
    assert blend(0.9, 0.5, 0.5) == pytest.approx(0.7)
    assert blend(0.9, 0.5, 1.0) == pytest.approx(0.9)
    assert blend(0.9, 0.5, 0.0) == pytest.approx(0.5)


def test_a_fact_entering_the_top_n_evicts_its_parent_episode():
    expander = EpisodeExpander(MragParams(top_n=2, alpha=0.5), scorer({"e1": [fact("f1", 0.9)]}))
    result = expander.run([ep("e1", 0.8), ep("e2", 0.3)])
    ids = [c.id for c in result]
    assert "f1" in ids and "e1" not in ids
    f1 = next(c for c in result if c.id == "f1")
    assert f1.score == pytest.approx(0.85) and f1.parent_id == "e1"


def test_an_episode_no_fact_displaced_stays():
    expander = EpisodeExpander(MragParams(top_n=3, alpha=0.5), scorer({"e1": [fact("f1", 0.1)]}))
    result = expander.run([ep("e1", 0.8), ep("e2", 0.6), ep("e3", 0.5)])
    assert [c.id for c in result] == ["e1", "e2", "e3"]


def test_output_is_sorted_and_bounded_by_top_n():
    table = {f"e{i}": [fact(f"f{i}a", 0.5 + i / 20), fact(f"f{i}b", 0.2)] for i in range(6)}
    result = EpisodeExpander(MragParams(top_n=4), scorer(table)).run([ep(f"e{i}", 0.4 + i / 20) for i in range(6)])
    scores = [c.score for c in result]
    assert scores == sorted(scores, reverse=True) and len(result) == 4


def test_only_the_best_facts_compete():
    facts = [fact(f"f{i}", 0.9 - i * 0.01) for i in range(8)]
    params = MragParams(top_n=10, facts_per_episode=6, facts_competing=3)
    expander = EpisodeExpander(params, scorer({"e1": facts}))
    result = expander.run([ep("e1", 0.5)])
    assert [c.id for c in result] == ["f0", "f1", "f2"]
    assert len(expander.expanded["e1"]) == 6  # scored, but only three competed


def test_episodes_are_expanded_in_batches_by_descending_score():
    calls = []
    EpisodeExpander(MragParams(top_n=5, batch_size=2), scorer({}, calls)).run(
        [ep("low", 0.1), ep("high", 0.9), ep("mid", 0.5)]
    )
    assert calls == [["high", "mid"], ["low"]]


def test_it_stops_after_patience_rounds_without_change():
    calls = []
    episodes = [ep(f"e{i}", 1 - i / 100) for i in range(30)]
    expander = EpisodeExpander(MragParams(top_n=5, batch_size=1, patience=3), scorer({}, calls))
    expander.run(episodes)
    assert len(calls) == 3 and expander.rounds == 3


def test_a_change_resets_the_patience_counter():
    calls = []
    table = {"e2": [fact("f2", 1.0)]}
    episodes = [ep(f"e{i}", 1 - i / 100) for i in range(30)]
    EpisodeExpander(MragParams(top_n=5, batch_size=1, patience=3), scorer(table, calls)).run(episodes)
    assert len(calls) == 6  # e0, e1 quiet; e2 changes; e3, e4, e5 quiet → stop


def test_the_why_scores_are_recorded():
    result = EpisodeExpander(MragParams(top_n=1, alpha=0.25), scorer({"e": [fact("f", 1.0)]})).run([ep("e", 0.6)])
    assert result[0].scores == {"fact": 1.0, "episode": 0.6, "alpha": 0.25, "final": pytest.approx(0.7)}


def test_an_items_sources_lead_with_those_its_best_facts_cite_and_keep_the_rest_in_order():
    from retrieval.results import most_relevant_first

    sources = [{"type": "message", "message_id": f"m{i}"} for i in range(1, 6)]
    facts = [{"sources": [{"type": "message", "message_id": "m4"}]},
             {"sources": [{"type": "message", "message_id": "m2"}, {"type": "message", "message_id": "m4"}]}]
    assert [s["message_id"] for s in most_relevant_first(sources, facts)] == ["m4", "m2", "m1", "m3", "m5"]
    assert most_relevant_first(sources, []) == sources
