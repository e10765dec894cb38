"""The stages of a search, in the order they run (`RETRIEVAL` inside the CPU budget, then `FINISHING`).

Each is declared in retrieval.search.pipeline's terms: a name, a line of help, what it reads and writes,
when it applies, and what it does (the work itself stays in the module named for it). `PIPELINE` is
the one order: `manage.py search --explain` prints it, the "why" view names its steps.
"""

from django.conf import settings

from retrieval import results
from retrieval.search.rerank import rerank_items
from retrieval.search import coverage, late_interaction, multilingual, query_bridge, ranking
from retrieval.search.agent_memory import EVERY_AGENT_NOTE, agent_memory_items, every_agent
from retrieval.search.agentic import agentic_search
from retrieval.search.memory_kinds import add_profiles_and_foresight
from retrieval.search.participants import prefer_participant
from retrieval.search.pipeline import Found
from retrieval.search import summaries
from retrieval.search.tense import apply_tense

RESULTS = ("facts", "episodes", "chunks")


class QueryBridge:
    name = "query_bridge"
    help = "a Chinese query's words in English (CC-CEDICT) join every keyword call (SEARCH_QUERY_BRIDGE)"
    reads = ("req",)
    writes = ("run", "bridged")

    def applies(self, found: Found) -> bool:
        return query_bridge.applies(found.req.query)

    def run(self, found: Found) -> None:
        found.bridged = query_bridge.english_terms(found.req.query)
        if found.bridged:
            found.run = found.run.with_bridge(found.bridged)


class Retrieve:
    name = "retrieve"
    help = "the method's engine calls: keyword, vector, hybrid (mRAG), agentic (hybrid + LLM rounds), paths or navigate"
    reads = ("req",)
    writes = ("response", "method_used", "notes")  # "response": every list of it, made here

    def applies(self, found: Found) -> bool:
        return True

    def run(self, found: Found) -> None:
        if found.req.method == "agentic":
            found.response, notes = agentic_search(found.run)
            found.notes = [*found.notes, *notes]
            # Agentic once the model's verdict is in, even when round 2 missed the deadline (a note says so).
            found.method_used = "agentic" if "agentic" in found.response else "hybrid"
        else:
            found.response, found.method_used = getattr(found.run, found.req.method)(), found.req.method


class LateInteraction:
    name = "late_interaction"
    help = "ColBERT MaxSim of an English query against the items' English sources (SEARCH_LATE_INTERACTION)"
    reads = ("req", "method_used", *RESULTS)
    writes = RESULTS

    def applies(self, found: Found) -> bool:
        return late_interaction.applies(found.req.query, found.method_used)

    def run(self, found: Found) -> None:
        late_interaction.rescore(found.req.query, found.response)
        coverage.spread_facts(found.response, settings.MRAG_FACTS_PER_MESSAGE)  # the stage re-sorted them


class Multilingual:
    name = "multilingual"
    help = "the multilingual reranker on Chinese and cross-language items (SEARCH_MULTILINGUAL_RERANK)"
    reads = ("req", "method_used", *RESULTS)
    writes = RESULTS

    def applies(self, found: Found) -> bool:
        return multilingual.applies(found.method_used)

    def run(self, found: Found) -> None:
        multilingual.rescore(found.req.query, found.response)


class Covered:
    name = "covered"
    help = "a fact whose messages the facts above it already cite is weighed down (SEARCH_COVERED_WEIGHT)"
    reads = ("facts",)
    writes = ("facts",)

    def applies(self, found: Found) -> bool:
        return found.req.method in ("hybrid", "agentic") and settings.SEARCH_COVERED_WEIGHT < 1.0

    def run(self, found: Found) -> None:
        coverage.demote_covered(found.response, settings.SEARCH_COVERED_WEIGHT)


class Cut:
    name = "cut"
    help = "each list back to the top_k asked for (the stages above reordered a wider candidate list)"
    reads = ("limit", *RESULTS)
    writes = ranking.LISTS

    def applies(self, found: Found) -> bool:
        return True

    def run(self, found: Found) -> None:
        for key in ranking.LISTS:
            if key in found.response:
                found.response[key] = found.response[key][:found.limit]


class MemoryKinds:
    name = "memory_kinds"
    help = "profiles, foresight and agent cases and skills join, before the floor and the ranks"
    reads = ("req",)
    writes = ("facts", "profiles", "agent_memory", "notes")

    def applies(self, found: Found) -> bool:
        return True

    def run(self, found: Found) -> None:
        add_profiles_and_foresight(found.run, found.response)  # profiles[], and foresight into facts when asked
        found.response["agent_memory"] = agent_memory_items(found.run)
        if every_agent(found.req):
            found.notes = [*found.notes, EVERY_AGENT_NOTE]
        if summaries.unbuilt(found.req):
            found.notes = [*found.notes, summaries.UNBUILT_NOTE]


class Floor:
    name = "floor"
    help = "hybrid's and agentic's results under MRAG_MIN_RELEVANCE are left out, and a weak answer is said so"
    reads = ("req", *ranking.LISTS)
    writes = (*ranking.LISTS, "floor", "below", "weak", "notes")

    def applies(self, found: Found) -> bool:
        return True

    def run(self, found: Found) -> None:
        # Keyword answers what matches a term and vector keeps VECTOR_MIN_SIMILARITY, since a short
        # English query's relevant cosine is lower than CMRC's, which the map was fitted on
        # (bench/RESULTS.md, "One relevance").
        found.floor = settings.MRAG_MIN_RELEVANCE if found.req.method in ("hybrid", "agentic") else 0.0
        found.below = ranking.drop_below(found.response, found.floor)
        found.weak = not any(found.response.get(key) for key in ranking.LISTS)
        if found.weak and found.below["dropped"]:
            found.notes = [*found.notes, f"Nothing answers this well: the best of {found.below['dropped']} results "
                                         f"has relevance {found.below['best']:.3f}, under the floor "
                                         f"{found.floor:g} (MRAG_MIN_RELEVANCE)."]


class Rerank:
    name = "rerank"
    help = "the configured reranker's score replaces the relevance (MRAG_RERANK or the request's rerank)"
    reads = ("req", *RESULTS)
    writes = RESULTS

    def applies(self, found: Found) -> bool:
        return bool(found.req.rerank or (found.req.rerank is None and settings.MRAG_RERANK))

    def run(self, found: Found) -> None:
        for key in RESULTS:
            found.response[key] = rerank_items(found.req.query, found.response.get(key, []))


class Tense:
    name = "tense"
    help = "\"now\" puts a current value first, \"used to\" brings back the one it replaced"
    reads = ("req", "facts", "episodes")
    writes = ("facts", "episodes")

    def applies(self, found: Found) -> bool:
        return True

    def run(self, found: Found) -> None:
        apply_tense(found.run, found.response)


class Context:
    name = "context"
    help = "each fact and episode gets the messages around what it cites (expand_context)"
    reads = ("req", "facts", "episodes")
    writes = ("facts", "episodes")

    def applies(self, found: Found) -> bool:
        return bool(found.req.expand_context)

    def run(self, found: Found) -> None:
        results.add_context(found.response["facts"] + found.response["episodes"])


class Neighbours:
    name = "neighbours"
    help = "the chunks and messages next to each result, in reading order (neighbours)"
    reads = ("req", *RESULTS)
    writes = RESULTS

    def applies(self, found: Found) -> bool:
        return bool(found.req.neighbours)

    def run(self, found: Found) -> None:
        response = found.response
        results.add_neighbours(response["facts"] + response["episodes"] + response.get("chunks", []),
                               found.req.neighbours)


class Participant:
    name = "participant"
    help = "results where the named participant speaks come first (filters.participant)"
    reads = ("req", "facts", "episodes")
    writes = ("facts", "episodes")

    def applies(self, found: Found) -> bool:
        return bool(found.req.filters.get("participant"))

    def run(self, found: Found) -> None:
        prefer_participant(found.response, found.req.filters["participant"])


class Ranks:
    name = "ranks"
    help = "one order over every kind: each top-level result's rank"
    reads = ranking.LISTS
    writes = ranking.LISTS

    def applies(self, found: Found) -> bool:
        return True

    def run(self, found: Found) -> None:
        ranking.assign_ranks(found.response)


class RawMessages:
    name = "raw_messages"
    help = "messages not yet made into memories (a session still open), in the search's scope"
    reads = ("req",)
    writes = ("raw_messages",)

    def applies(self, found: Found) -> bool:
        return True

    def run(self, found: Found) -> None:
        found.response["raw_messages"] = results.raw_messages(found.run.scope, found.run.base.kb_ids,
                                                              found.req.filters)


# Retrieval and the stages that rescore its candidates run inside the CPU budget; the rest after it.
RETRIEVAL = (QueryBridge(), Retrieve(), LateInteraction(), Multilingual(), Covered(), Cut(), MemoryKinds())
FINISHING = (Floor(), Rerank(), Tense(), Context(), Neighbours(), Participant(), Ranks(), RawMessages())
PIPELINE = RETRIEVAL + FINISHING
