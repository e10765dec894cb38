"""Where summary-tree nodes (retrieval/summary_tree) join a search: in the episode lists.

A node is a narrative over several episodes, so it competes with episodes, scored by the same fused
recall; it has no facts, so the expansion leaves it as it is, and the response shows it among the
episodes marked `memory_type: "summary"` with its level and leaves. Asked for by name (memory_types
"summary", alone or beside "episode"), or by every hybrid search that reads episodes when
SUMMARY_TREE_IN_HYBRID is on."""

from django.conf import settings

from retrieval.request import SearchRequest


def wanted(req: SearchRequest) -> bool:
    return "summary" in req.memory_types


def episode_kinds(req: SearchRequest) -> tuple[str, ...]:
    """The index kinds hybrid's episode recall reads for this request."""
    asked = wanted(req)
    if asked and not ({"episode", "atomic_fact"} & set(req.memory_types)):
        return ("summary",)
    if asked or settings.SUMMARY_TREE_IN_HYBRID:
        return ("episode", "summary")
    return ("episode",)


def keeps_episodes(req: SearchRequest) -> bool:
    """Whether the expansion keeps episodes (and so nodes) no fact displaced."""
    return "episode" in req.memory_types or wanted(req)


UNBUILT_NOTE = ("memory_types asks for summaries, but summary trees are not built here (SUMMARY_TREE is off): "
                "turn it on and run `manage.py reindex` to build them.")


def unbuilt(req: SearchRequest) -> bool:
    """Summaries asked for where none are built: said in `query.notes`, not left to read as "no summary"."""
    return wanted(req) and not settings.SUMMARY_TREE
