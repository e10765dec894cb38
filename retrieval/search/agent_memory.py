"""Agent memory in a search: the agent cases and skills that answer the query (the seed's `agent_memory`).

Asked for with memory_types "agent_case" / "agent_skill" (every agent's, when none is named), and given
whenever the search names an agent (filters.agent_id): an agent asking its memory gets what it did and
what it learnt. Both kinds are recalled like foresight (dense + BM25 over their own rows under the
request's filter, scopes and metadata included, fused into calibrated relevance), so they rank with
facts, episodes and chunks in one order. A skill's score is weighted by its maturity: a skill that keeps failing ranks lower.
"""

from dataclasses import replace

from memory.models import Memory
from retrieval import results
from retrieval.search.memory_kinds import _fused

KINDS = ("agent_case", "agent_skill")
# A skill of maturity m keeps (FLOOR + (1 - FLOOR)·m) of its relevance.
MATURITY_FLOOR = 0.7
EVERY_AGENT_NOTE = ("memory_types asks for agent memory and filters.agent_id names no agent: the cases and skills "
                    "of every agent are searched; name one with filters.agent_id.")


def wanted_kinds(req) -> tuple[str, ...]:
    asked = tuple(k for k in KINDS if k in req.memory_types)
    if asked:
        return asked
    agent = req.filters.get("agent_id")
    return KINDS if agent and agent != "*" else ()


def every_agent(req) -> bool:
    """Agent memory asked for by type with no agent named: an agent's cases are all under some agent, so
    the search looks under every agent the caller may read rather than under none (it found nothing)."""
    return any(k in req.memory_types for k in KINDS) and "agent_id" not in req.filters


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
