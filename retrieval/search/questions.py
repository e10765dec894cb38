"""Candidate questions as a recall channel of hybrid search (issue 39, retrieval/questions).

The query is matched against the questions each fact and chunk answers (rows of kind "question"),
by the same dense and BM25 calls as every other recall list, started beside them. A question that
matches stands for its source: its hit joins the source kind's recall lists under the source's id,
with the better of the two scores (the source's own and its question's), so the fusion ranks and
scores the source as if its text had matched that well. Questions are never results themselves.

Read only from a build whose questions the configured generator wrote (retrieval/builds.py): after a
change of generator the channel stays off until `manage.py reindex`, and says so once.
"""

import logging
from dataclasses import dataclass, replace

from django.conf import settings

from memory.models import Memory
from retrieval import questions
from retrieval.backends.base import Hit, IndexFilter
from retrieval.search.engines import Engines

log = logging.getLogger(__name__)

# Which recall list a question's source joins, by the prefix of the source's id (projection/questions.py).
LISTS = {"chunk:": ("chunks", "chunk"), "memory:": ("facts", "atomic_fact")}
_warned: set[tuple[str, str]] = set()


@dataclass
class Started:
    dense: object
    sparse: object | None


def active(engines: Engines) -> bool:
    """Whether the channel runs: the setting is on and the build holds this generator's questions."""
    if not settings.CANDIDATE_QUESTIONS:
        return False
    held, wanted = engines.build.questions, questions.identity()
    if held is None or held == wanted:  # None: a build from before generators were recorded
        return True
    if (held, wanted) not in _warned:
        _warned.add((held, wanted))
        log.warning("index build %s holds candidate questions of %r, not of %r: they are not searched until "
                    "`manage.py reindex`", engines.build.number, held or "none", wanted)
    return False


def start(engines: Engines, base: IndexFilter, limit: int) -> Started:
    flt = replace(base, kinds=("question",), parent_ids=(), or_ids=(), ids=())
    sparse = engines.start_bm25(flt, limit) if settings.CANDIDATE_QUESTIONS_MATCH == "both" else None
    return Started(engines.start_dense(flt, limit), sparse)


def lift(joined: dict, started: Started) -> None:
    """Add the sources of the matched questions to the recall lists in `joined` ({key: (dense, BM25)})."""
    found = (Engines.result(started.dense), Engines.result(started.sparse) if started.sparse is not None else [])
    sources = {h.extra.get("parent_id", "") for hits in found for h in hits}
    episodes = _episodes_of([s for s in sources if s.startswith("memory:")]) if "facts" in joined else {}
    for prefix, (key, kind) in LISTS.items():
        if key not in joined:
            continue
        lists = []
        for own, matched in zip(joined[key], found):
            lists.append(_merged(own, [h for h in matched if h.extra.get("parent_id", "").startswith(prefix)],
                                 kind, episodes))
        joined[key] = tuple(lists)


def _merged(own: list[Hit], matched: list[Hit], kind: str, episodes: dict[str, str]) -> list[Hit]:
    best = {h.id: h for h in own}
    for q in matched:
        source = q.extra["parent_id"]
        if kind == "atomic_fact" and source not in episodes:
            continue  # not a fact (or gone): nothing to lift in this list
        if source in best and best[source].score >= q.score:
            continue
        extra = {"kind": kind, "parent_id": episodes.get(source, ""), "via_question": q.id}
        if source in best:
            extra = {**best[source].extra, "via_question": q.id}
        best[source] = Hit(source, q.score, extra)
    return sorted(best.values(), key=lambda h: h.score, reverse=True)


def _episodes_of(fact_ids: list[str]) -> dict[str, str]:
    """{fact id: its episode's id} for the facts among these memories."""
    if not fact_ids:
        return {}
    pks = [i.split(":", 1)[1] for i in fact_ids]
    rows = Memory.objects.filter(pk__in=pks, kind=Memory.Kind.ATOMIC_FACT).values_list("pk", "parent_id")
    return {f"memory:{pk}": f"memory:{parent}" if parent else "" for pk, parent in rows}
