"""A search scoped to one participant of a group chat (filters.participant) prefers what is theirs.

Nothing is left out: the participant's personal episodes (conversations.group_episodes) and
the facts they stated (their subject, or their name as the statement's speaker) gain
PARTICIPANT_BONUS relevance (capped at 1), so they rank above the group's account of the same turn.
"""

from memory.models import Memory
from retrieval.search.pipeline import Found, When

PARTICIPANT_BONUS = 0.2


def prefer_participant(response: dict, name: str) -> None:
    items = [*response.get("episodes", []), *response.get("facts", [])]
    ids = [item["id"] for item in items if item.get("id")]
    if not ids:
        return
    mine = set()
    wanted = name.casefold()
    for pk, kind, text, meta in Memory.objects.filter(pk__in=ids).values_list("pk", "kind", "text", "metadata"):
        meta = meta or {}
        if kind == Memory.Kind.EPISODE:
            if meta.get("episode_type") == "personal" and str(meta.get("participant", "")).casefold() == wanted:
                mine.add(str(pk))
        elif str(meta.get("subject", "")).casefold() == wanted or text.casefold().startswith(wanted + ":"):
            mine.add(str(pk))
    for key in ("episodes", "facts"):
        for item in response.get(key, []):
            if item.get("id") in mine:
                item["score"] = round(min(1.0, item["score"] + PARTICIPANT_BONUS), 6)
                item["scores"] = {**item.get("scores", {}), "participant": PARTICIPANT_BONUS}
        response[key] = sorted(response.get(key, []), key=lambda item: item["score"], reverse=True)


class Participant:
    name = "participant"
    help = "results where the named participant speaks come first (filters.participant)"
    reads = ("req", "facts", "episodes")
    writes = ("facts", "episodes")
    applies = When(filter="participant")

    def run(self, found: Found) -> None:
        prefer_participant(found.response, found.req.filters["participant"])
