"""The stages that give results their surroundings: the messages around what each cites (`context`),
and the chunks and messages next to each result (`neighbours`); the work is retrieval.results'."""

from retrieval import results
from retrieval.search.pipeline import RESULTS, Found, When


class Context:
    name = "context"
    help = "each fact and episode gets the messages around what it cites (expand_context)"
    reads = ("req", "facts", "episodes")
    writes = ("facts", "episodes")
    applies = When(asks="expand_context")

    def run(self, found: Found) -> None:
        results.add_context(found.response["facts"] + found.response["episodes"])


class Neighbours:
    name = "neighbours"
    help = "the chunks and messages next to each result, in reading order (neighbours)"
    reads = ("req", *RESULTS)
    writes = RESULTS
    applies = When(asks="neighbours")

    def run(self, found: Found) -> None:
        response = found.response
        results.add_neighbours(response["facts"] + response["episodes"] + response.get("chunks", []),
                               found.req.neighbours)
