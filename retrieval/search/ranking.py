"""One merged order over a response's facts, episodes, chunks, agent memory and profiles, and the floor.

Every item's `score` is its calibrated relevance (retrieval.relevance), so the lists can be ranked
against each other: each top-level item gets `rank` (1 = best) across all of them (foresight is
among the facts, agent cases and skills in `agent_memory`, profile items in `profiles`). The lists
keep their shape (shared/DESIGN.md); facts nested under an episode are its supporting detail and
are not ranked. Ties keep the lists' order (facts, episodes, chunks, agent memory, profiles, each best first).
"""

LISTS = ("facts", "episodes", "chunks", "agent_memory", "profiles")


def drop_below(response: dict, floor: float) -> dict:
    """Leave out the items under `floor`; return how many there were and the best relevance seen."""
    seen = [it["score"] for key in LISTS for it in response.get(key, [])]
    for key in LISTS:
        if key in response:
            response[key] = [it for it in response[key] if it["score"] >= floor]
    return {"dropped": sum(s < floor for s in seen), "best": max(seen, default=None)}


def merged(response: dict) -> list[dict]:
    """The response's top-level items, best first: the order `rank` numbers."""
    items = [it for key in LISTS for it in response.get(key, [])]
    return sorted(items, key=lambda it: it["score"], reverse=True)


def assign_ranks(response: dict) -> None:
    for rank, item in enumerate(merged(response), start=1):
        item["rank"] = rank
