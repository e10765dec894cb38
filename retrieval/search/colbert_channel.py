"""Hybrid's ColBERT recall channel (issue 36): the scope's messages nearest to the query by MaxSim.

The late-interaction stage (search/late_interaction.py) rescores what hybrid already found; a message
whose words neither the episode summary's embedding nor BM25 matches is never among them. Exhaustive
MaxSim over a conversation's turns alone reached R@10 0.71–0.74 on LoCoMo, and fused with hybrid added
to it, most on multi-hop questions (bench/RESULTS.md). This channel finds those messages in the whole
permitted scope, and they surface as the episodes that cite them:

1. the query's token vectors (the stage's own, cached by the model) against each KB's centroids
   (search/colbert_partitions.py, a cached copy of retrieval/backends/token_codes.py's index), inside the
   filter's user/session/agent/group/run: PLAID's centroid interaction, pruned (each query token's
   PROBE best centroids that a message has a token in), then for a shortlist unpruned (every token of
   the message replaced by its centroid: centroid-only MaxSim);
2. exact MaxSim over the stored vectors of the CANDIDATES best, read from the database under the
   search's whole permission filter (tenant, KBs, scopes); a KB without a codebook (under
   token_codes.MIN_TOKENS) is scored exactly throughout;
3. the SEARCH_COLBERT_CHANNEL_MESSAGES best, with (SEARCH_COLBERT_NEIGHBOURS) the turns before and
   after the best NEIGHBOURS_OF of them in their session (GAR: an answer is often the reply);
4. the episodes citing them join hybrid's coarse recall (`pulled_in`), fused and scored by dense and
   BM25 like the entity channel's, with the channel's MaxSim shown as `scores["colbert_channel"]`.

A message no memory cites yet (not flushed) is not surfaced: search returns memories (docs/limitations.md).
"""

import logging
import math
from dataclasses import dataclass, replace

import numpy as np
from django.conf import settings
from django.db.models import Q

from memory.models import Memory, Message
from retrieval.backends import token_vectors
from retrieval.backends.base import IndexFilter
from retrieval.models import TokenVectors
from retrieval.projection import memory_key
from retrieval.relevance import script
from retrieval.search import colbert_partitions
from retrieval.search.mrag import Candidate, blend

log = logging.getLogger(__name__)

PROBE = 16  # centroids per query token: chosen on the test fixture and LoCoMo (bench/RESULTS.md)
SHORTLIST = 5  # × CANDIDATES messages of the pruned order scored by all their centroids
CANDIDATES = 200  # messages scored exactly: the prototype kept 94 % of the exact top 20 in the centroid top 100
NEIGHBOURS_OF = 3  # best messages whose adjacent turns join (SEARCH_COLBERT_NEIGHBOURS)


@dataclass
class ChannelRecall:
    messages: dict[int, float]  # message pk → MaxSim (a neighbour: its hit's)
    episodes: dict[str, float]  # episode id → the best MaxSim of the messages it cites
    facts: dict[str, tuple[float, str]]  # fact id → (the best MaxSim of the messages it cites, its episode id)


def applies(query: str) -> bool:
    return bool(settings.SEARCH_COLBERT_CHANNEL and settings.SEARCH_LATE_INTERACTION) and script(query) == "latin"


def channel_recall(query: str, base: IndexFilter) -> ChannelRecall | None:
    """The channel's messages and their episodes, or None when it does not apply. A model or index that
    fails degrades the search to the other channels with a warning, as the late-interaction stage does."""
    if not applies(query):
        return None
    try:
        model = token_vectors.model()
        found = best_messages(model.encode_query(query), base, settings.SEARCH_COLBERT_CHANNEL_MESSAGES)
        if settings.SEARCH_COLBERT_NEIGHBOURS:
            found = with_neighbours(found, base)
        return ChannelRecall(found, *citing(found, base))
    except Exception as exc:
        log.warning("the ColBERT channel failed, searching without it: %s", exc)
        return None


# --- finding messages

def best_messages(query: np.ndarray, base: IndexFilter, limit: int, *, exhaustive: bool = False) -> dict[int, float]:
    """The `limit` messages of the filter's scope of highest MaxSim, best first (`exhaustive`: every
    KB scored exactly, the reference the index is measured against)."""
    name = token_vectors.model().name
    proposed: list[int] = []
    exact_kbs = []
    for kb_id in base.kb_ids:
        part = None if exhaustive else colbert_partitions.partition(kb_id, name)
        if part is None or part.tenant_id != base.tenant_id:
            exact_kbs.append(kb_id)
        else:
            proposed += approximate(part, query, base, CANDIDATES)
    scored = {}
    allowed = _allowed(base, name)
    if proposed:
        scored.update(exact(query, allowed.filter(message_id__in=proposed)))
    if exact_kbs:
        scored.update(exact(query, allowed.filter(message__kb_id__in=exact_kbs)))
    order = sorted(scored, key=lambda pk: (-scored[pk], pk))[:limit]
    return {pk: scored[pk] for pk in order}


def approximate(part: colbert_partitions.Partition, query: np.ndarray, base: IndexFilter, n: int) -> list[int]:
    """The `n` in-scope messages of best centroid-only MaxSim (each token replaced by its centroid), best
    first. Scoring every message so would read every token's code; first, as PLAID prunes, each message
    gets the best, per query token, of the PROBE nearest centroids that it has a token in (0 when none),
    and only the SHORTLIST × n best of that order are scored by all their tokens' centroids."""
    idx = np.flatnonzero(part.in_scope(base) & (np.diff(part.offsets) > 0))
    similarity = query @ part.centroids.T  # query tokens × k
    if len(idx) > SHORTLIST * n:
        idx = idx[_pruned_best(part, similarity, idx, SHORTLIST * n)]
    if not len(idx):
        return []
    starts, ends = part.offsets[idx], part.offsets[idx + 1]
    tokens = np.concatenate([part.codes[s:e] for s, e in zip(starts, ends)])
    positions = np.concatenate([[0], np.cumsum(ends - starts)[:-1]])
    scores = np.maximum.reduceat(similarity[:, tokens], positions, axis=1).mean(axis=0)
    best = np.argsort(-scores, kind="stable")[:n]
    return part.message_pks[idx[best]].tolist()


def _pruned_best(part: colbert_partitions.Partition, similarity: np.ndarray, idx: np.ndarray, m: int) -> np.ndarray:
    """Positions in `idx` of the `m` best by the pruned centroid interaction (in no order)."""
    probe = min(PROBE, similarity.shape[1])
    top = np.argpartition(-similarity, probe - 1, axis=1)[:, :probe]
    # Weights as uint8 (cosine × 255, negatives 0): the max runs over bytes, a quarter of float32's traffic.
    weights = np.rint(np.clip(np.take_along_axis(similarity, top, axis=1), 0, 1) * 255).astype(np.uint8)
    # Columns of the scope first when it is a small part of the KB (one user of many): fewer to gather.
    whole = len(idx) >= len(part.message_pks) // 2
    presence = part.presence if whole else part.presence[:, idx]
    best = np.zeros((len(similarity), presence.shape[1]), dtype=np.uint8)
    for j in range(probe):  # per query token, the best of its probed centroids the message has
        np.maximum(best, presence[top[:, j]] * weights[:, j, None], out=best)
    scores = best.sum(axis=0, dtype=np.int32)
    if whole:
        scores = scores[idx]
    return np.argpartition(-scores, m - 1)[:m]  # a full sort of 100k scores cost ~8 ms


def _allowed(base: IndexFilter, model_name: str):
    """The stored message vectors the search may read: its tenant, KBs and narrowing scopes."""
    q = Q(model=model_name, message__tenant_id=base.tenant_id, message__kb_id__in=base.kb_ids)
    for column in colbert_partitions.SCOPES:
        value = getattr(base, column)
        if value is not None:
            q &= Q(**{f"message__{column}": value})
    return TokenVectors.objects.filter(q)


def exact(query: np.ndarray, rows) -> dict[int, float]:
    """MaxSim of the query against each row's stored int8 matrix, all rows in one product."""
    found = list(rows.values_list("message_id", "tokens", "data"))
    if not found:
        return {}
    from retrieval.runtimes.colbert import dequantise

    matrix = np.frombuffer(b"".join(bytes(d) for _, _, d in found), dtype=np.int8).reshape(-1, query.shape[1])
    products = query @ dequantise(matrix).T
    starts = np.cumsum([0] + [t for _, t, _ in found[:-1]])
    scores = np.maximum.reduceat(products, starts, axis=1).mean(axis=0)
    return {pk: float(s) for (pk, _, _), s in zip(found, scores)}


def with_neighbours(found: dict[int, float], base: IndexFilter) -> dict[int, float]:
    """`found` and the turns just before and after its NEIGHBOURS_OF best in their session (same
    tenant, KB, user and session: a neighbour is in the hit's scope), each at its hit's score."""
    out = dict(found)
    best = list(found)[:NEIGHBOURS_OF]
    for m in Message.objects.filter(pk__in=best, tenant_id=base.tenant_id, kb_id__in=base.kb_ids):
        session = Message.objects.filter(tenant_id=m.tenant_id, kb_id=m.kb_id, user_id=m.user_id,
                                         session_id=m.session_id)
        before = session.filter(Q(timestamp__lt=m.timestamp) | Q(timestamp=m.timestamp, pk__lt=m.pk))
        after = session.filter(Q(timestamp__gt=m.timestamp) | Q(timestamp=m.timestamp, pk__gt=m.pk))
        for pk in (before.order_by("-timestamp", "-pk").values_list("pk", flat=True).first(),
                   after.order_by("timestamp", "pk").values_list("pk", flat=True).first()):
            if pk is not None and pk not in out:
                out[pk] = found[m.pk]
    return out


# --- surfacing

def citing(found: dict[int, float], base: IndexFilter) -> tuple[dict[str, float], dict[str, tuple[float, str]]]:
    """The active episodes and facts citing these messages (Memory.source_message_ids are client message
    ids within the memory's KB, user and session), each with the best score of those it cites, best
    first; a fact with its episode's id."""
    if not found:
        return {}, {}
    score_of: dict[tuple, float] = {}
    for pk, kb_id, user_id, session_id, message_id in Message.objects.filter(
            pk__in=list(found), tenant_id=base.tenant_id, kb_id__in=base.kb_ids).values_list(
            "pk", "kb_id", "user_id", "session_id", "message_id"):
        score_of[(kb_id, user_id, session_id, message_id)] = found[pk]
    sessions = {where[:3] for where in score_of}
    q = Q(pk__in=[])
    for kb_id, user_id, session_id in sessions:
        q |= Q(kb_id=kb_id, user_id=user_id, session_id=session_id)
    episodes: dict[str, float] = {}
    facts: dict[str, tuple[float, str]] = {}
    for pk, kind, parent_id, kb_id, user_id, session_id, cited in Memory.objects.filter(
            q, tenant_id=base.tenant_id, kind__in=(Memory.Kind.EPISODE, Memory.Kind.ATOMIC_FACT),
            status=Memory.Status.ACTIVE).values_list("pk", "kind", "parent_id", "kb_id", "user_id", "session_id",
                                                     "source_message_ids"):
        scores = [score_of[(kb_id, user_id, session_id, m)] for m in cited or ()
                  if (kb_id, user_id, session_id, m) in score_of]
        if not scores:
            continue
        if kind == Memory.Kind.EPISODE:
            episodes[memory_key(pk)] = max(scores)
        elif parent_id:
            facts[memory_key(pk)] = (max(scores), memory_key(parent_id))
    return (dict(sorted(episodes.items(), key=lambda kv: (-kv[1], kv[0]))),
            dict(sorted(facts.items(), key=lambda kv: (-kv[1][0], kv[0]))))


def channel_episodes(found: ChannelRecall | None) -> list[str]:
    """The channel's episodes, best first: known before the recall is joined, so the prefetch scores
    them and their facts in the same engine calls as the other episodes (as the entity channel's)."""
    return list(found.episodes) if found is not None else []


def pulled_in(fuse, engines, base: IndexFilter, recalled: list[Candidate], found: ChannelRecall) -> list[Candidate]:
    """The channel's episodes the other channels missed, fused by `fuse` like the rest; every episode
    it found shows its score."""
    known = {e.id for e in recalled}
    new = [i for i in found.episodes if i not in known]
    pulled = fuse(engines, replace(base, kinds=("episode",), ids=tuple(new)), len(new)) if new else []
    for c in [*recalled, *pulled]:
        score = found.episodes.get(c.id)
        if score is not None and math.isfinite(score):
            c.scores["colbert_channel"] = round(score, 6)
    return pulled


def rescored_facts(found: ChannelRecall, ranked: list[Candidate], episodes: list[Candidate], score_facts: dict,
                   alpha: float) -> list[Candidate]:
    """The facts citing the channel's messages that hybrid's list lacks, appended to what the rescoring
    stages read (late interaction, after hybrid's top_k and runners-up): the recall holds their
    episodes, yet an expansion keeps a few facts of each, so a fact whose message ColBERT ranks first
    may not be listed. Scored as the expansion scores a fact (blended with its episode's score)."""
    listed = {c.id for c in ranked}
    by_episode = {e.id: e for e in episodes}
    wanted = [(fid, parent) for fid, (_, parent) in found.facts.items() if fid not in listed and parent in by_episode]
    scored = {f.id: f for parent in dict.fromkeys(parent for _, parent in wanted) for f in score_facts.get(parent, [])}
    out = []
    for fid, parent in wanted:
        fact = scored.get(fid)
        if fact is None:
            continue
        c = Candidate(fid, "atomic_fact", blend(fact.score, by_episode[parent].score, alpha), parent,
                      {**fact.scores, "colbert_channel": round(found.facts[fid][0], 6)})
        out.append(c)
    return out
