"""Agent skills: cases cluster by task (incrementally, one cluster state per user and agent), and a
cluster with enough successful cases yields a reusable skill whose maturity follows its outcomes.

Clustering (the seed's clustering manager): a new case joins the nearest cluster of its scope when
the cosine of its task embedding with the cluster's centroid is at least CLUSTER_COSINE, its tools
overlap the cluster's (Jaccard at least TOOL_OVERLAP: a skill is one procedure, and task texts alone
put "book a flight" beside "book a hotel" and two Chinese requests together at E5 cosines of
0.83-0.92), and the cluster's latest case is at most CLUSTER_GAP older; else it starts a cluster. Clusters are rows
(memory.CaseCluster), so the state survives restarts and a case is placed once.

A skill (a Memory of kind agent_skill) exists once a cluster holds MIN_SUCCESSES successful cases:
- name: the task of its best successful case, shortened; when: the tasks it was learnt from;
- steps: the steps of the best successful case; pitfalls: what went wrong in the others (tool
  errors, failure reports, the person's complaints), deduplicated;
- maturity = (s + 1) / (s + f + 2), s the successful cases plus success feedback, f the failed
  cases plus failure feedback: 2 successes give 0.75, each success after that raises it and each
  reported failure lowers it. It is a pure function of the cluster's cases and the feedback, so
  refreshing twice changes nothing.
Every change of a skill's text writes a history row (ADD, then UPDATE with the reason).
"""

import numpy as np
from django.db import transaction
from django.utils import timezone

from conversations.agent_cases import FAILURE_LABEL, SUCCESS_LABEL, label, score
from memory.ids import memory_uuid
from memory.models import CaseCluster, Memory, MemoryHistory
from retrieval.embeddings import embedder
from retrieval.projection import index_memories

CLUSTER_COSINE = 0.80
TOOL_OVERLAP = 0.5
CLUSTER_GAP = timezone.timedelta(days=90)
MIN_SUCCESSES = 2
MAX_PITFALLS = 5
FEEDBACK_OUTCOMES = ("success", "failure")


def _unit(vector) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


def cluster_cases(cases: list[Memory], *, actor: str = "") -> list[Memory]:
    """Place each new case in its scope's clusters and refresh the skills they touch; return the skills
    written (call inside the transaction that created the cases)."""
    if not cases:
        return []
    vectors = embedder().embed_documents([c.metadata.get("task") or c.topic or c.text for c in cases])
    touched: dict[int, CaseCluster] = {}
    for case, vector in zip(cases, vectors):
        cluster = _place(case, _unit(vector))
        touched[cluster.pk] = cluster
    written = []
    for cluster in touched.values():
        skill = refresh_skill(cluster, actor=actor, reason="learnt from a new case")
        if skill is not None:
            written.append(skill)
    return written


def _place(case: Memory, vector: np.ndarray) -> CaseCluster:
    scope = CaseCluster.objects.select_for_update().filter(tenant_id=case.tenant_id, kb_id=case.kb_id,
                                                            user_id=case.user_id, agent_id=case.agent_id)
    at = case.occurred_at or timezone.now()
    tools = list(case.metadata.get("tools", []))
    best, best_cos = None, -1.0
    for cluster in scope:
        if str(case.pk) in cluster.case_ids:
            return cluster  # placed already (a re-extraction): nothing moves
        if abs(at - cluster.last_at) > CLUSTER_GAP or _overlap(tools, cluster.tools) < TOOL_OVERLAP:
            continue
        cos = float(_unit(cluster.centroid) @ vector)
        if cos > best_cos:
            best, best_cos = cluster, cos
    if best is None or best_cos < CLUSTER_COSINE:
        return CaseCluster.objects.create(tenant_id=case.tenant_id, kb_id=case.kb_id, user_id=case.user_id,
                                          agent_id=case.agent_id, centroid=[float(x) for x in vector],
                                          case_ids=[str(case.pk)], tools=tools, last_at=at)
    n = len(best.case_ids)
    best.centroid = [float(x) for x in (np.asarray(best.centroid, dtype=np.float32) * n + vector) / (n + 1)]
    best.case_ids = [*best.case_ids, str(case.pk)]
    best.last_at = max(best.last_at, at)
    best.tools = list(dict.fromkeys([*best.tools, *tools]))
    best.save(update_fields=["centroid", "case_ids", "tools", "last_at"])
    return best


def _overlap(a, b) -> float:
    """Jaccard overlap of two tool lists (1.0 when neither names a tool)."""
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 1.0


def skill_id(cluster: CaseCluster):
    return memory_uuid("skill", cluster.tenant_id, cluster.kb_id, cluster.pk)


def refresh_skill(cluster: CaseCluster, *, actor: str = "", reason: str = "refreshed") -> Memory | None:
    """Write the cluster's skill from its active cases (create, update or leave it); the skill or None."""
    cases = list(Memory.objects.filter(pk__in=cluster.case_ids, kind=Memory.Kind.AGENT_CASE,
                                       status=Memory.Status.ACTIVE))
    order = {pk: i for i, pk in enumerate(cluster.case_ids)}
    cases.sort(key=lambda c: order.get(str(c.pk), 0))
    successes = [c for c in cases if c.metadata.get("outcome_label") == SUCCESS_LABEL]
    skill = Memory.objects.filter(pk=skill_id(cluster)).first()
    if len(successes) < MIN_SUCCESSES and skill is None:
        return None
    failures = [c for c in cases if c.metadata.get("outcome_label") == FAILURE_LABEL]
    feedback = (skill.metadata.get("feedback", []) if skill else [])
    s = len(successes) + sum(1 for f in feedback if f["outcome"] == "success")
    f = len(failures) + sum(1 for f in feedback if f["outcome"] == "failure")
    maturity = round((s + 1) / (s + f + 2), 3)
    best = max(successes, key=lambda c: (c.metadata.get("quality", 0), str(c.pk))) if successes else cases[0]
    name = best.metadata.get("task", best.topic)[:120]
    # A failure reported as feedback (on the skill or on one of its cases) is a pitfall too: its text
    # is what a reader of the skill sees, and "Pitfalls: none seen" after a reported failure misleads.
    pitfalls = [item["note"] for item in feedback if item["outcome"] == "failure" and item.get("note")]
    for c in cases:
        for item in c.metadata.get("evidence", []):
            if item["kind"] in ("tool_error", "agent_reported_failure", "user_negative", "feedback_failure"):
                text = item.get("text", "")
                if item.get("tool"):
                    text = f"{item['tool']}: {text}"
                if text and text not in pitfalls:
                    pitfalls.append(text)
    steps = [step["text"] for step in best.metadata.get("steps", [])]
    when = list(dict.fromkeys(c.metadata.get("task", "") for c in successes))[:3]
    text = (f"Agent skill: {name} | When: {'; '.join(when)} | Steps: "
            f"{'; '.join(f'{i}. {s}' for i, s in enumerate(steps, 1)) or 'none recorded'} | Pitfalls: "
            f"{'; '.join(pitfalls[:MAX_PITFALLS]) or 'none seen'} | Maturity {maturity:.2f} "
            f"({len(successes)} of {len(cases)} cases succeeded{_reported(feedback)})")
    metadata = {"name": name, "when": when, "steps": steps, "pitfalls": pitfalls[:MAX_PITFALLS],
                "maturity": maturity, "case_ids": [str(c.pk) for c in cases], "successes": len(successes),
                "failures": len(failures), "cluster_id": cluster.pk, "feedback": feedback}
    sources = list(dict.fromkeys(mid for c in cases for mid in c.source_message_ids))
    now = timezone.now()
    if skill is None:
        skill = Memory.objects.create(
            id=skill_id(cluster), tenant_id=cluster.tenant_id, kb_id=cluster.kb_id, kind=Memory.Kind.AGENT_SKILL,
            text=text, topic=name[:300], source_message_ids=sources, user_id=cluster.user_id,
            agent_id=cluster.agent_id, session_id=best.session_id, occurred_at=cluster.last_at,
            extraction_mode="deterministic", metadata=metadata)
        MemoryHistory.objects.create(memory_id=skill.pk, tenant_id=skill.tenant_id, event=MemoryHistory.Event.ADD,
                                     new_text=text, new_status=skill.status, actor=actor, created_at=now,
                                     reason=f"skill from {len(successes)} successful cases"[:300])
    elif skill.text != text or skill.metadata != metadata:
        if skill.text != text:
            MemoryHistory.objects.create(memory_id=skill.pk, tenant_id=skill.tenant_id,
                                         event=MemoryHistory.Event.UPDATE, old_text=skill.text, new_text=text,
                                         old_status=skill.status, new_status=skill.status, actor=actor,
                                         created_at=now, reason=reason[:300])
        skill.text, skill.metadata, skill.source_message_ids = text, metadata, sources
        skill.topic, skill.occurred_at = name[:300], cluster.last_at
        skill.save(update_fields=["text", "metadata", "source_message_ids", "topic", "occurred_at", "updated_at",
                                  "content_hash"])
    else:
        return skill
    if cluster.skill_id != skill.pk:
        cluster.skill = skill
        cluster.save(update_fields=["skill"])
    transaction.on_commit(lambda: index_memories([skill]))
    return skill


def _reported(feedback: list[dict]) -> str:
    """"; 1 failure reported, 2 successes reported": the skill's own feedback, beside its cases' count."""
    counts = [(sum(1 for f in feedback if f["outcome"] == outcome), outcome) for outcome in ("failure", "success")]
    said = [f"{n} {outcome}{'s' if n != 1 and outcome == 'failure' else 'es' if n != 1 else ''} reported"
            for n, outcome in counts if n]
    return f"; {', '.join(said)}" if said else ""


class FeedbackError(ValueError):
    """Feedback the caller must fix (HTTP 400)."""


def record_feedback(memory: Memory, outcome: str, *, note: str = "", actor: str = "") -> Memory:
    """Feedback on a case (its quality moves, its skill is refreshed) or a skill (its maturity moves),
    with a history row. Returns the memory as it is now."""
    if outcome not in FEEDBACK_OUTCOMES:
        raise FeedbackError(f"'outcome' must be one of: {', '.join(FEEDBACK_OUTCOMES)}.")
    if memory.kind not in (Memory.Kind.AGENT_CASE, Memory.Kind.AGENT_SKILL):
        raise FeedbackError("Feedback is recorded on agent cases and agent skills only.")
    if memory.status != Memory.Status.ACTIVE:
        raise FeedbackError(f"The memory is {memory.status}; feedback goes to active memories.")
    now = timezone.now()
    entry = {"outcome": outcome, "note": note[:300], "actor": actor[:200], "at": now.isoformat()}
    with transaction.atomic():
        memory = Memory.objects.select_for_update().get(pk=memory.pk)
        meta = dict(memory.metadata)
        meta["feedback"] = [*meta.get("feedback", []), entry]
        old_text = memory.text
        if memory.kind == Memory.Kind.AGENT_CASE:
            meta["evidence"] = [*meta.get("evidence", []), {"kind": f"feedback_{outcome}", "text": note[:120]}]
            meta["quality"] = score(meta["evidence"])
            meta["outcome_label"] = label(meta["quality"])
            memory.text = _case_text(memory.text, meta)
            memory.metadata = meta
            memory.save(update_fields=["text", "metadata", "updated_at", "content_hash"])
            reason = f"feedback: {outcome}; quality {meta['quality']:.2f}"
            cluster = _cluster_of(memory)
        else:
            memory.metadata = meta
            memory.save(update_fields=["metadata", "updated_at"])
            reason = f"feedback: {outcome}"
            cluster = CaseCluster.objects.filter(pk=meta.get("cluster_id")).first()
        MemoryHistory.objects.create(memory_id=memory.pk, tenant_id=memory.tenant_id, event=MemoryHistory.Event.UPDATE,
                                     old_text=old_text, new_text=memory.text, old_status=memory.status,
                                     new_status=memory.status, actor=actor, created_at=now,
                                     reason=(f"{reason}: {note}" if note else reason)[:300])
        if memory.kind == Memory.Kind.AGENT_CASE:
            transaction.on_commit(lambda: index_memories([memory]))
        if cluster is not None:
            skill = refresh_skill(cluster, actor=actor, reason=reason)
            if skill is not None and skill.pk == memory.pk:
                memory = skill
    return memory


def _cluster_of(case: Memory) -> CaseCluster | None:
    # Scanned in Python: JSON containment lookups differ between SQLite and PostgreSQL, and a scope
    # holds few clusters.
    for cluster in CaseCluster.objects.filter(tenant_id=case.tenant_id, kb_id=case.kb_id, user_id=case.user_id,
                                              agent_id=case.agent_id):
        if str(case.pk) in cluster.case_ids:
            return cluster
    return None


def _case_text(text: str, meta: dict) -> str:
    """The case's text with its outcome label and quality as they are now."""
    head, sep, _ = text.rpartition("| Outcome (")
    if not sep:
        return text
    return f"{head}| Outcome ({meta['outcome_label']}, quality {meta['quality']:.2f}): {meta.get('outcome') or 'not stated'}"
