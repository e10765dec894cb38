"""One merged order over a response's facts, episodes, chunks, agent memory and profiles, and the floor.

Every item's `score` is its calibrated relevance (retrieval.relevance), so the lists can be ranked
against each other: each top-level item gets `rank` (1 = best) across all of them (foresight is
among the facts, agent cases and skills in `agent_memory`, profile items in `profiles`). The lists
keep their shape (shared/DESIGN.md); facts nested under an episode are its supporting detail and
are not ranked. Ties keep the lists' order (facts, episodes, chunks, agent memory, profiles, each best first).

The stages `cut`, `floor` and `ranks` are declared here.
"""

from django.conf import settings

from retrieval.search.pipeline import ALWAYS, HYBRIDS, LISTS, RESULTS, Found

__all__ = ["LISTS", "Cut", "Floor", "Ranks", "assign_ranks", "drop_below", "merged"]


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


class Cut:
    name = "cut"
    help = "each list back to the top_k asked for (the stages above reordered a wider candidate list)"
    reads = ("limit", *RESULTS)
    writes = LISTS
    applies = ALWAYS

    def run(self, found: Found) -> None:
        for key in LISTS:
            if key in found.response:
                found.response[key] = found.response[key][:found.limit]


class Floor:
    name = "floor"
    help = "hybrid's and agentic's results under MRAG_MIN_RELEVANCE are left out, and a weak answer is said so"
    reads = ("req", *LISTS)
    writes = (*LISTS, "floor", "below", "weak", "notes")
    applies = ALWAYS

    def run(self, found: Found) -> None:
        # Keyword answers what matches a term and vector keeps VECTOR_MIN_SIMILARITY, since a short
        # English query's relevant cosine is lower than CMRC's, which the map was fitted on
        # (bench/RESULTS.md, "One relevance").
        found.floor = settings.MRAG_MIN_RELEVANCE if found.req.method in HYBRIDS else 0.0
        found.below = drop_below(found.response, found.floor)
        found.weak = not any(found.response.get(key) for key in LISTS)
        if found.weak and found.below["dropped"]:
            found.notes = [*found.notes, f"Nothing answers this well: the best of {found.below['dropped']} results "
                                         f"has relevance {found.below['best']:.3f}, under the floor "
                                         f"{found.floor:g} (MRAG_MIN_RELEVANCE)."]


class Ranks:
    name = "ranks"
    help = "one order over every kind: each top-level result's rank"
    reads = LISTS
    writes = LISTS
    applies = ALWAYS

    def run(self, found: Found) -> None:
        assign_ranks(found.response)
