"""The stage that adds the messages not yet made into memories (a session still open) to a search's
response, in its scope; the reading is retrieval.results'."""

from retrieval import results
from retrieval.search.pipeline import ALWAYS, Found


class RawMessages:
    name = "raw_messages"
    help = "messages not yet made into memories (a session still open), in the search's scope"
    reads = ("req",)
    writes = ("raw_messages",)
    applies = ALWAYS

    def run(self, found: Found) -> None:
        found.response["raw_messages"] = results.raw_messages(found.run.scope, found.run.base.kb_ids,
                                                              found.req.filters)
