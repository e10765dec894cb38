"""Evidence coverage: a fact that only repeats messages the items above it already cite gives way.

Several facts are often drawn from one message (a long reply yields many similar ones), so a list
of k items can hold far fewer than k distinct sources: LongMemEval's hybrid top 20 held 13–24
distinct messages (bench/RESULTS.md, issue 24 item 7). Walking the merged order best first, a fact
whose source messages are all cited by the facts above it has its relevance × SEARCH_COVERED_WEIGHT
(`scores["covered"]` records it for the "why" view), and the lists are re-sorted: a fact citing a
new message takes its place. Episodes are left alone: an episode cites its whole segment, so counting
its messages would cover every fact said in it. A pure function of the response.
"""

from django.conf import settings

from retrieval.search.pipeline import HYBRIDS, LISTS, Found, When


def message_sources(item: dict) -> frozenset:
    return frozenset((s.get("session_id"), s["message_id"]) for s in item.get("sources", [])
                     if s.get("type") == "message")


def demote_covered(response: dict, weight: float) -> int:
    """Scale the relevance of covered facts by `weight` in place, re-sort; return how many were."""
    if weight >= 1.0 or not response.get("facts"):
        return 0
    seen: set = set()
    demoted = 0
    for fact in sorted(response["facts"], key=lambda it: it["score"], reverse=True):
        sources = message_sources(fact)
        if sources and sources <= seen:
            fact["scores"]["covered"] = weight
            fact["score"] = round(fact["score"] * weight, 6)
            demoted += 1
        seen |= sources
    if demoted:
        for key in LISTS:
            if key in response:
                response[key] = sorted(response[key], key=lambda it: it["score"], reverse=True)
    return demoted


class Covered:
    name = "covered"
    help = "a fact whose messages the facts above it already cite is weighed down (SEARCH_COVERED_WEIGHT)"
    reads = ("facts",)
    writes = ("facts",)
    applies = When(methods=HYBRIDS, weight="SEARCH_COVERED_WEIGHT")

    def run(self, found: Found) -> None:
        demote_covered(found.response, settings.SEARCH_COVERED_WEIGHT)
