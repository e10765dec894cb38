"""mRAG expansion: recalled episodes compete with their atomic facts for the top-N.

The five stages of the seed article (DESIGN.md): (1) coarse recall over episodes (done by the
caller), (2) a min-heap of the current top-N and a max-heap of episodes waiting to be expanded,
(3) batched expansion into each episode's facts with final = α·fact + (1−α)·episode, a fact
entering the top-N evicts its parent episode, stop when the queue is empty or after R rounds
without change, (4) output sorted by final score, (5) optional rerank (by the caller).
"""

import heapq
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Candidate:
    id: str
    kind: str  # "episode" or "atomic_fact"
    score: float
    parent_id: str = ""
    scores: dict = field(default_factory=dict)  # per-stage scores, for the "why" view


@dataclass(frozen=True)
class MragParams:
    top_n: int
    alpha: float = 0.5
    facts_per_episode: int = 6  # facts scored per expanded episode (EverOS default)
    facts_competing: int = 3  # of those, how many may compete for the top-N (EverOS default)
    batch_size: int = 4  # episodes expanded per round
    patience: int = 10  # rounds without a change to the top-N before stopping (EverOS default)


# Each episode's facts with fact scores: a table (hybrid scores every fact of the recalled episodes up
# front), or a function of a batch's episode ids.
FactScorer = dict[str, list[Candidate]] | Callable[[list[str]], dict[str, list[Candidate]]]


def blend(fact_score: float, episode_score: float, alpha: float) -> float:
    """mRAG's final fact score: α·fact + (1−α)·episode (the seed article's α = 0.5)."""
    return alpha * fact_score + (1.0 - alpha) * episode_score


class EpisodeExpander:
    """Runs stages 2–4 over recalled episodes; `score_facts` returns each episode's facts with fact scores."""

    def __init__(self, params: MragParams, score_facts: FactScorer):
        self.params = params
        self.score_facts = score_facts
        self.rounds = 0
        self.expanded: dict[str, list[Candidate]] = {}

    def run(self, episodes: list[Candidate]) -> list[Candidate]:
        p = self.params
        top: list[tuple[float, int, Candidate]] = []  # min-heap of (score, tiebreak, candidate)
        members: dict[str, Candidate] = {}
        counter = 0

        def offer(c: Candidate) -> bool:
            nonlocal counter
            if c.id in members:
                return False
            if len(top) < p.top_n:
                counter += 1
                heapq.heappush(top, (c.score, -counter, c))
                members[c.id] = c
                return True
            if c.score <= top[0][0]:
                return False
            counter += 1
            _, _, out = heapq.heapreplace(top, (c.score, -counter, c))
            members.pop(out.id, None)
            members[c.id] = c
            return True

        def evict(episode_id: str) -> None:
            if episode_id in members:
                members.pop(episode_id)
                top[:] = [entry for entry in top if entry[2].id != episode_id]
                heapq.heapify(top)

        for episode in episodes:
            offer(episode)
        queue = [(-e.score, i, e) for i, e in enumerate(episodes)]  # max-heap by episode score
        heapq.heapify(queue)
        quiet_rounds = 0
        while queue and quiet_rounds < p.patience:
            batch = [heapq.heappop(queue)[2] for _ in range(min(p.batch_size, len(queue)))]
            self.rounds += 1
            scored = (self.score_facts if isinstance(self.score_facts, dict)
                      else self.score_facts([e.id for e in batch]))
            changed = False
            for episode in batch:
                facts = sorted(scored.get(episode.id, []), key=lambda f: f.score, reverse=True)[: p.facts_per_episode]
                finals = []
                for fact in facts:
                    final = blend(fact.score, episode.score, p.alpha)
                    finals.append(Candidate(fact.id, "atomic_fact", final, episode.id,
                                            {**fact.scores, "fact": fact.score, "episode": episode.score,
                                             "alpha": p.alpha, "final": final}))
                finals.sort(key=lambda f: f.score, reverse=True)
                self.expanded[episode.id] = finals
                for fact in finals[: p.facts_competing]:
                    if offer(fact):
                        changed = True
                        evict(episode.id)
            quiet_rounds = 0 if changed else quiet_rounds + 1
        return sorted(members.values(), key=lambda c: c.score, reverse=True)


def expanded(params: MragParams, score_facts: FactScorer, episodes: list[Candidate]) -> tuple[EpisodeExpander,
                                                                                              list[Candidate]]:
    """An expander of `episodes`, run: it (its `expanded` table) and the ranked candidates."""
    expander = EpisodeExpander(params, score_facts)
    return expander, expander.run(episodes)
