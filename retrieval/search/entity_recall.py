"""Hybrid's third recall channel: the entities a query names (entities/lookup.py).

Stage 1 gains the episodes of the facts that name an entity of the query (scored by dense and
BM25 like every recalled episode); every recalled episode and scored fact that names one gains
`MRAG_ENTITY_WEIGHT` times its entity score (search/scoring.py's `boosted`), shown as
`scores["entity"]` in the "why" view.
"""

from dataclasses import replace

from django.conf import settings

from entities.lookup import EntityRecall, recall
from retrieval.backends.base import IndexFilter
from retrieval.search.mrag import Candidate


def entity_recall(query: str, base: IndexFilter) -> EntityRecall | None:
    """The channel's lookup (a database query in the request thread), or None when it is switched off."""
    return recall(query, base) if settings.MRAG_ENTITY_RECALL else None


def entity_episodes(found: EntityRecall | None) -> list[str]:
    """The channel's best episodes, at most MRAG_ENTITY_EPISODES: known before the recall is joined,
    so the prefetch scores them (and their facts) in the same engine calls as the other episodes."""
    if found is None:
        return []
    return sorted(found.episodes, key=lambda i: (-found.episodes[i], i))[: settings.MRAG_ENTITY_EPISODES]


def pulled_in(fuse, engines, base: IndexFilter, recalled: list[Candidate], found: EntityRecall) -> list[Candidate]:
    """The channel's episodes the other channels missed, fused by `fuse` like the rest."""
    known = {e.id for e in recalled}
    new = [i for i in entity_episodes(found) if i not in known]
    return fuse(engines, replace(base, kinds=("episode",), ids=tuple(new)), len(new)) if new else []
