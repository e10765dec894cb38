"""The kinds beside episodes and facts in a search response: profile items (`profiles`), foresight and
agent memory (`agent_memory`), added by the `memory_kinds` stage declared here.

Each is its own small recall over its own index rows (kinds "profile" and "foresight"), inside the
same permission filter as the rest, with the query embedded once for the whole search:
- profile items that bear on the query fill `profiles` on every search that names users' memories;
- foresight, asked for with memory_types "foresight", joins `facts` (by score) marked
  `memory_type: "foresight"` with its window; one whose window has ended is demoted
  (EXPIRED_FORESIGHT_WEIGHT), and `filters.valid_at` keeps only those whose window holds then;
- agent memory: the agent cases and skills that answer the query (the seed's `agent_memory`).
  Asked for with memory_types "agent_case" / "agent_skill" (every agent's, when none is named), and
  given whenever the search names an agent (filters.agent_id): an agent asking its memory gets what
  it did and what it learnt. Both kinds are recalled like foresight, so they rank with facts,
  episodes and chunks in one order. A skill's score is weighted by its maturity: a skill that keeps
  failing ranks lower.
"""

from dataclasses import replace
from datetime import datetime, timezone

from django.conf import settings
from django.db.models import TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from memory.models import Memory
from retrieval import results
from retrieval.backends.base import IndexFilter
from retrieval.search.pipeline import ALWAYS, Found
from retrieval.search.scoring import fact_score, rrf

# A plan whose window has passed still answers "what did she plan?", but below what holds now:
# halving its fused relevance moves it under any comparably relevant live item.
EXPIRED_FORESIGHT_WEIGHT = 0.5
# valid_at resolves to ids in the database first, so the engines search only those: the filter is in
# the engine query, before top-k. A tenant with more foresight valid at one moment than this is cut.
MAX_VALID_AT_IDS = 2000
PROFILE_ITEMS = 5  # profile items a search shows at most
AGENT_KINDS = ("agent_case", "agent_skill")
# A skill of maturity m keeps (FLOOR + (1 - FLOOR)·m) of its relevance.
MATURITY_FLOOR = 0.7
EVERY_AGENT_NOTE = ("memory_types asks for agent memory and filters.agent_id names no agent: the cases and skills "
                    "of every agent are searched; name one with filters.agent_id.")
UNBUILT_NOTE = ("memory_types asks for summaries, but summary trees are not built here (SUMMARY_TREE is off): "
                "turn it on and run `manage.py reindex` to build them.")


class MemoryKinds:
    name = "memory_kinds"
    help = "profiles, foresight and agent cases and skills join, before the floor and the ranks"
    reads = ("req",)
    writes = ("facts", "profiles", "agent_memory", "notes")
    applies = ALWAYS

    def run(self, found: Found) -> None:
        add_profiles_and_foresight(found.run, found.response)  # profiles[], and foresight into facts when asked
        found.response["agent_memory"] = agent_memory_items(found.run)
        if every_agent(found.req):
            found.notes = [*found.notes, EVERY_AGENT_NOTE]
        # Summaries asked for where none are built: said in `query.notes`, not left to read as "no summary".
        if "summary" in found.req.memory_types and not settings.SUMMARY_TREE:
            found.notes = [*found.notes, UNBUILT_NOTE]


def add_profiles_and_foresight(run, response: dict) -> None:
    response["profiles"] = profile_items(run)
    if "foresight" in run.req.memory_types:
        response["facts"] = sorted([*response.get("facts", []), *foresight_items(run)],
                                   key=lambda item: item["score"], reverse=True)


def foresight_items(run) -> list[dict]:
    flt = replace(run.base, kinds=("foresight",))
    if not _has_rows(flt, Memory.Kind.FORESIGHT):
        return []
    valid_at = run.req.filters.get("valid_at")
    if valid_at:
        ids = valid_foresight_ids(flt, valid_at)
        if not ids:
            return []
        flt = replace(flt, ids=tuple(ids))
    ranked = _fused(run.engines, flt, run.req.limit)
    memories = results.load_memories(run.scope, [i for i, _, _ in ranked])
    now = _utc_iso(datetime.now(timezone.utc))
    items = []
    for item_id, score, scores in ranked:
        memory = memories.get(item_id)
        if memory is None:
            continue
        expired = memory.metadata.get("valid_until", "") <= now
        if expired:
            score *= EXPIRED_FORESIGHT_WEIGHT
            scores = {**scores, "expired_weight": EXPIRED_FORESIGHT_WEIGHT}
        items.append(foresight_item(memory, score, scores, expired))
    return sorted(items, key=lambda item: item["score"], reverse=True)


def foresight_item(memory: Memory, score: float, scores: dict, expired: bool) -> dict:
    return {**results.fact_item(memory, score, scores), "memory_type": "foresight",
            "valid_from": memory.metadata.get("valid_from"), "valid_until": memory.metadata.get("valid_until"),
            "expired": expired, "extraction_mode": memory.extraction_mode or "deterministic"}


def valid_foresight_ids(flt: IndexFilter, at: str) -> list[str]:
    """Index ids of the active foresight in the filter's scope whose window [from, until) holds `at`."""
    qs = Memory.objects.filter(tenant_id=flt.tenant_id, kb_id__in=flt.kb_ids, kind=Memory.Kind.FORESIGHT,
                               status=Memory.Status.ACTIVE)
    if flt.user_id:
        qs = qs.filter(user_id=flt.user_id)
    if flt.session_id:
        qs = qs.filter(session_id=flt.session_id)
    for field in ("agent_id", "group_id", "run_id"):
        if getattr(flt, field) is not None:
            qs = qs.filter(**{field: getattr(flt, field)})
    if flt.document_ids:
        qs = qs.filter(document_id__in=flt.document_ids)
    # Text comparison of one fixed UTC format is time comparison, in SQLite and PostgreSQL alike.
    qs = qs.annotate(window_from=Cast(KT("metadata__valid_from"), TextField()),
                     window_until=Cast(KT("metadata__valid_until"), TextField()))
    pks = qs.filter(window_from__lte=at, window_until__gt=at).values_list("pk", flat=True)[:MAX_VALID_AT_IDS]
    return [f"memory:{pk}" for pk in pks]


def profile_items(run) -> list[dict]:
    """Profile items that bear on the query: those sharing a term with it (BM25), ranked with their cosine.

    BM25 first: a profile is small and cosine alone ranks every item of it, related or not. No engine
    is called for a scope without profile items (a documents-only tenant pays one indexed query).
    """
    # A profile is the user's, whatever agent, group or run asks: those scopes do not narrow it.
    flt = replace(run.base, kinds=("profile",), agent_id=None, group_id=None, run_id=None)
    if run.req.filters.get("document_id") or not _has_rows(flt, Memory.Kind.PROFILE):
        return []
    sparse, cos = run.engines.bm25_with_cosines(flt, PROFILE_ITEMS * 4)
    if not sparse:
        return []
    scored = sorted(((h.id, _relevance(cos.get(h.id, 0.0), h.score)) for h in sparse), key=lambda r: r[1],
                    reverse=True)[:PROFILE_ITEMS]
    memories = results.load_memories(run.scope, [i for i, _ in scored])
    return [profile_item(memories[i], score) for i, score in scored if i in memories]


def _has_rows(flt: IndexFilter, kind: str) -> bool:
    qs = Memory.objects.filter(tenant_id=flt.tenant_id, kb_id__in=flt.kb_ids, kind=kind, status=Memory.Status.ACTIVE)
    return qs.filter(user_id=flt.user_id).exists() if flt.user_id else qs.exists()


def _relevance(cosine: float, bm25: float) -> float:
    return fact_score(cosine, bm25)


def profile_item(memory: Memory, score: float | None = None) -> dict:
    meta = memory.metadata
    item = {
        "id": str(memory.pk), "user_id": memory.user_id, "subject": meta.get("subject", ""),
        "category": meta.get("category", memory.topic), "value": meta.get("value", ""), "text": memory.text,
        "kind": meta.get("kind", "explicit"), "status": memory.status,
        "extraction_mode": memory.extraction_mode or "deterministic",
        "since": meta.get("first_seen"), "last_seen": meta.get("last_seen"),
        "fact_ids": meta.get("fact_ids", []), "message_ids": list(memory.source_message_ids),
        "superseded_by": str(memory.superseded_by_id) if memory.superseded_by_id else None,
    }
    if score is not None:
        item["score"] = round(score, 6)
    return item


def _fused(engines, flt: IndexFilter, limit: int) -> list[tuple[str, float, dict]]:
    """Dense + BM25 over the filter, RRF order, logistic relevance as the score (the facts' weights)."""
    dense, sparse = engines.both(flt, limit)
    cos = {h.id: h.score for h in dense}
    missing = [h.id for h in sparse if h.id not in cos]
    if missing:  # exact cosines for BM25-only hits, as hybrid's fusion does
        cos.update({h.id: h.score for h in engines.dense(replace(flt, ids=tuple(missing)), len(missing), floor=-1.0)})
    bm25 = {h.id: h.score for h in sparse}
    order = rrf([[h.id for h in dense], [h.id for h in sparse]], k=settings.MRAG_RRF_K)
    out = []
    for item_id in sorted(order, key=order.get, reverse=True)[:limit]:
        c, b = cos.get(item_id, 0.0), bm25.get(item_id, 0.0)
        score = _relevance(c, b)
        out.append((item_id, score, {"cosine": c, "bm25": b, "fused": score}))
    return sorted(out, key=lambda r: r[1], reverse=True)


def _utc_iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")


# --- agent memory

def wanted_kinds(req) -> tuple[str, ...]:
    asked = tuple(k for k in AGENT_KINDS if k in req.memory_types)
    if asked:
        return asked
    agent = req.filters.get("agent_id")
    return AGENT_KINDS if agent and agent != "*" else ()


def every_agent(req) -> bool:
    """Agent memory asked for by type with no agent named: an agent's cases are all under some agent, so
    the search looks under every agent the caller may read rather than under none (it found nothing)."""
    return any(k in req.memory_types for k in AGENT_KINDS) and "agent_id" not in req.filters


def agent_memory_items(run) -> list[dict]:
    kinds = wanted_kinds(run.req)
    if not kinds or run.req.filters.get("document_id"):
        return []
    flt = replace(run.base, kinds=kinds)
    if every_agent(run.req):
        flt = replace(flt, agent_id=None)
    qs = Memory.objects.filter(tenant_id=flt.tenant_id, kb_id__in=flt.kb_ids, kind__in=kinds,
                               status=Memory.Status.ACTIVE)
    if flt.agent_id is not None:
        qs = qs.filter(agent_id=flt.agent_id)
    if flt.user_id is not None:
        qs = qs.filter(user_id=flt.user_id)
    if not qs.exists():
        return []
    ranked = _fused(run.engines, flt, run.req.limit)
    memories = results.load_memories(run.scope, [i for i, _, _ in ranked])
    items = []
    for item_id, score, scores in ranked:
        memory = memories.get(item_id)
        if memory is None:
            continue
        if memory.kind == Memory.Kind.AGENT_SKILL:
            weight = MATURITY_FLOOR + (1 - MATURITY_FLOOR) * float(memory.metadata.get("maturity", 0.5))
            score, scores = score * weight, {**scores, "maturity_weight": round(weight, 4)}
        items.append(agent_item(memory, score, scores))
    return sorted(items, key=lambda item: item["score"], reverse=True)


def agent_item(memory: Memory, score: float, scores: dict) -> dict:
    meta = memory.metadata
    item = {**results.fact_item(memory, score, scores), "memory_type": memory.kind, "text": memory.text,
            "agent_id": memory.agent_id or None, "extraction_mode": memory.extraction_mode or "deterministic"}
    if memory.kind == Memory.Kind.AGENT_CASE:
        item.update({"task": meta.get("task", ""), "steps": [s["text"] for s in meta.get("steps", [])],
                     "outcome": meta.get("outcome", ""), "outcome_label": meta.get("outcome_label", ""),
                     "quality": meta.get("quality"), "evidence": meta.get("evidence", []),
                     "tools": meta.get("tools", [])})
    else:
        item.update({"name": meta.get("name", ""), "when": meta.get("when", []), "steps": meta.get("steps", []),
                     "pitfalls": meta.get("pitfalls", []), "maturity": meta.get("maturity"),
                     "case_ids": meta.get("case_ids", [])})
    return item
