"""The rescoring stages' wider list comes from what hybrid already scored (retrieval.search.hybrid.runners_up):
past top_k, the next best facts and episodes of the same recall and expansion, under the expansion's own
rule, so a stage reorders 30 candidates without a second, larger search (the cost that kept the
late-interaction stage off: bench/RESULTS.md)."""

from retrieval.search.hybrid import runners_up
from retrieval.search.mrag import Candidate, EpisodeExpander, MragParams


def episode(i: str, score: float) -> Candidate:
    return Candidate(f"memory:e{i}", "episode", score)


def fact(i: str, parent: str, score: float) -> Candidate:
    return Candidate(f"memory:f{i}", "atomic_fact", score, f"memory:e{parent}")


def expanded(table: dict[str, list[Candidate]], top_n: int = 2) -> tuple[EpisodeExpander, list[Candidate]]:
    episodes = [episode("1", 0.9), episode("2", 0.8), episode("3", 0.5), episode("4", 0.4)]
    expander = EpisodeExpander(
        MragParams(top_n=top_n, facts_competing=2, patience=10), lambda ids: {e: table.get(e, []) for e in ids}
    )
    return expander, episodes


def test_the_next_items_are_the_best_of_what_the_expansion_scored_in_score_order():
    expander, episodes = expanded(
        {
            "memory:e1": [fact("1a", "1", 0.95), fact("1b", "1", 0.7), fact("1c", "1", 0.69)],
            "memory:e2": [fact("2a", "2", 0.6)],
        }
    )
    ranked = [c for c in expander.run(episodes)]
    assert [c.id for c in ranked] == ["memory:f1a", "memory:f1b"]  # facts displaced their episode

    more = runners_up(ranked, episodes, expander, 3, keep_episodes=True)

    # e2's fact is its best: it stands for e2; e1 is displaced by its listed facts; the third fact of
    # e1 never competed (facts_competing 2), as in a wider expansion.
    assert [c.id for c in more] == ["memory:f2a", "memory:e3", "memory:e4"]
    assert [c.score for c in more] == sorted((c.score for c in more), reverse=True)


def test_an_episode_listed_keeps_its_facts_nested_and_a_fact_listed_displaces_its_episode():
    expander, episodes = expanded({"memory:e2": [fact("2a", "2", 0.3)], "memory:e3": [fact("3a", "3", 0.45)]})
    ranked = expander.run(episodes)
    assert [c.id for c in ranked] == ["memory:e1", "memory:e2"]

    more = runners_up(ranked, episodes, expander, 5, keep_episodes=True)

    ids = [c.id for c in more]
    assert "memory:f2a" not in ids  # e2 is listed: its fact shows nested under it
    assert "memory:f3a" in ids and "memory:e3" not in ids  # e3 gives way to its fact
    assert ids == ["memory:f3a", "memory:e4"]


def test_facts_only_when_episodes_are_not_asked_for_and_never_more_than_asked():
    expander, episodes = expanded(
        {
            e.id: [fact(f"{e.id[-1]}{k}", e.id[-1], e.score - 0.01 * k) for k in range(3)]
            for e in [episode("1", 0.9), episode("2", 0.8), episode("3", 0.5), episode("4", 0.4)]
        },
        top_n=2,
    )
    ranked = [c for c in expander.run(episodes) if c.kind == "atomic_fact"]

    more = runners_up(ranked, episodes, expander, 3, keep_episodes=False)

    assert len(more) == 3 and all(c.kind == "atomic_fact" for c in more)
    assert not {c.id for c in more} & {c.id for c in ranked}
