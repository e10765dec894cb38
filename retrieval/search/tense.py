"""The present and the past in a question about a user's memory (issue 28).

A superseded fact leaves the indexes (retrieval/projection/), but the episode it came from still tells the
old value in its summary: "Where do I work now?" found the episode of the old job beside the fact of
the new one. So, after ranking:
- a question about the present ("now", "currently", "现在", "目前") weighs down an episode holding a
  fact that was superseded (SUPERSEDED_EPISODE_WEIGHT), so the current value comes first;
- beside each fact in the response come the older facts it superseded, marked `status:
  "superseded"` with `superseded_by`: just above it for a question about the past ("used to",
  "before", "以前": the old value is what it asks for), just under it for any other, since an update is
  evidence of both values (the two read together: the change and what it changed);
- a request with `reference_time` or `valid_at` is left as it is: it names its own moment.
"""

import re

from memory.models import Memory
from retrieval import results
from retrieval.search.pipeline import ALWAYS, Found

# An episode whose fact was superseded still matches the attribute's words as well as the newer
# one; 0.8 moves it under a comparably relevant current item without hiding what else it holds.
SUPERSEDED_EPISODE_WEIGHT = 0.8
# A question not about the past still sees what a listed fact superseded, just under it: "What time do
# I wake up on Saturdays?" is answered by the newer time, and the older one tells it changed (LongMemEval
# counts both sessions as the evidence of a knowledge update). Session 8 put it at ×0.9 of the newer
# score: on LongMemEval 48_dad224aa another fact came between and pushed the old time to rank 11.
# Without a neighbour, the older value sits this share of its score under (or above) the newer one.
PREDECESSOR_GAP = 0.1
MAX_PREDECESSORS = 10  # older facts added per search at most

_PRESENT = re.compile(r"\b(?:now|currently|current|these days|at the moment|nowadays|presently|at present|"
                      r"still|anymore|latest)\b|现在|目前|如今|当前|眼下|这阵子", re.I)
_PAST = re.compile(r"\b(?:used to|did \w+ use to|before|previously|formerly|originally|former|in the past|back then|earlier|"
                   r"prior|first)\b|以前|之前|过去|原来|曾经|以往|当初|从前", re.I)


def tense_of(query: str) -> str:
    """"past", "present" or "" for a question that names neither (or both)."""
    past, present = bool(_PAST.search(query)), bool(_PRESENT.search(query))
    if past == present:
        return ""
    return "past" if past else "present"


def apply_tense(run, response: dict) -> None:
    if run.req.reference_time is not None or run.req.filters.get("valid_at"):
        return
    tense = tense_of(run.req.query)
    if tense == "present":
        _weigh_down_superseded_episodes(response)
    _add_predecessors(run, response, tense)


def _weigh_down_superseded_episodes(response: dict) -> None:
    episodes = response.get("episodes") or []
    if not episodes:
        return
    stale = set(Memory.objects.filter(parent_id__in=[e["id"] for e in episodes], status=Memory.Status.SUPERSEDED)
                .values_list("parent_id", flat=True))
    for episode in episodes:
        if any(str(pk) == episode["id"] for pk in stale):
            episode["score"] = round(episode["score"] * SUPERSEDED_EPISODE_WEIGHT, 6)
            episode["scores"] = {**episode.get("scores", {}), "superseded_weight": SUPERSEDED_EPISODE_WEIGHT}
    episodes.sort(key=lambda item: item["score"], reverse=True)


def predecessor_score(newer: float, tense: str, neighbour: float | None = None) -> float:
    """Where an older value goes: above the fact that replaced it for a question about the past, else
    under it — halfway to the next listed score (`neighbour`, the next higher or lower one), or
    PREDECESSOR_GAP of its own score when none is there. Never level with it: a reader shown two
    values at one score cannot tell which is current (issue 35)."""
    if tense == "past":
        return (newer + neighbour) / 2 if neighbour is not None and neighbour > newer else newer * (1 + PREDECESSOR_GAP)
    return (newer + neighbour) / 2 if neighbour is not None and neighbour < newer else newer * (1 - PREDECESSOR_GAP)


def _add_predecessors(run, response: dict, tense: str) -> None:
    """Beside each listed fact, the older facts it superseded (predecessor_score): an update is evidence
    of both values."""
    facts = response.get("facts") or []
    if not facts:
        return
    score_of = {f["id"]: f["score"] for f in facts}
    # By `superseded_by` alone (its index: a few rows per listed fact), the scope checked on the rows:
    # with the tenant and KB in the WHERE clause, SQLite (no statistics: nothing runs ANALYZE) walked
    # the (tenant, kb, kind, status) index, every memory of the KB (6-7 ms a search at 100k).
    kb_ids = set(run.base.kb_ids)
    older = [m for m in Memory.objects.filter(superseded_by_id__in=list(score_of)).select_related("kb")
             if m.status == Memory.Status.SUPERSEDED and m.tenant_id == run.scope.tenant.pk and m.kb_id in kb_ids
             and (not run.base.user_id or m.user_id == run.base.user_id)
             and (not run.base.session_id or m.session_id == run.base.session_id)]
    older = sorted(older, key=lambda m: m.updated_at, reverse=True)[:MAX_PREDECESSORS]
    shown = {f["id"] for f in facts}
    for memory in older:
        if str(memory.pk) in shown:
            continue
        newer = score_of[str(memory.superseded_by_id)]
        others = [f["score"] for f in facts if f["score"] != newer]
        if tense == "past":
            neighbour = min((s for s in others if s > newer), default=None)
        else:
            neighbour = max((s for s in others if s < newer), default=None)
        score = round(predecessor_score(newer, tense, neighbour), 6)
        facts.append({**results.fact_item(memory, score, {"superseded_of": newer}), "status": "superseded",
                      "superseded_by": str(memory.superseded_by_id)})
    facts.sort(key=lambda item: item["score"], reverse=True)
    del facts[max(len(shown), run.req.limit):]  # top_k still holds: an older value displaces the weakest


class Tense:
    name = "tense"
    help = "\"now\" puts a current value first, \"used to\" brings back the one it replaced"
    reads = ("req", "facts", "episodes")
    writes = ("facts", "episodes")
    applies = ALWAYS

    def run(self, found: Found) -> None:
        apply_tense(found.run, found.response)
