"""Deciding what a newly extracted fact does to a user's memory: add, merge into a duplicate, supersede.

Reads only; `conversations.actions` writes the plan in its transaction.

- Same content hash as an active fact of the same user (and KB) → merge: no second row, the new
  message ids join the existing fact's sources.
- A near-duplicate of such a fact (found through the vector index, or among facts written earlier
  in the same call, which the index has not seen yet) → merge the same way. Near means cosine ≥
  DUPLICATE_COSINE *and* the same speaker, the same numbers and mostly the same words: e5's cosine
  alone ranks "Melanie: Caroline's kind words mean a lot." 0.99 close to the same words said by
  Caroline, and two pottery classes on different dates 0.98 close.
- Otherwise a new fact. It supersedes an older fact of the same user that states another value of
  the same attribute of the same subject, and the two facts must be at least SUPERSEDE_MIN_COSINE
  similar. With an LLM, the model decides among the similar older facts; without one,
  `claims.supersedes`: for the subject's employer, title, home and partner, where the statement
  model (statements.py, its token tags or its e5 head) reads a state change ("quit Contoso", "now at
  Fabrikam", "我换工作了"), the slot it changes against the slot the older fact holds, each read by
  the token model, the e5 head (where the default embedder is the bundled e5-small) or claims.py's
  patterns; the patterns alone for what the model has no slot for (a favourite, a wake-up time, a
  pet's death, a trip "instead").
"""

import logging
from dataclasses import dataclass, field

import numpy as np

from conversations.claims import RULE_ATTRIBUTES, changes_state, claim, supersedes
from conversations.statements import head_applies, read, readings
from extraction.dates import undated
from memory.models import Memory
from retrieval import fitted
from retrieval.backends import vector_index
from retrieval.backends.base import IndexFilter
from retrieval.embeddings import embedder
from retrieval.text import tokenize
from tenants.models import Tenant

log = logging.getLogger(__name__)

# multilingual-e5-small compresses cosines: a typical fact's nearest neighbour is already close, and
# many facts have a neighbour that says something else above any looser threshold
# (see bench/RESULTS.md, "Design notes moved from code comments", DUPLICATE_COSINE).
# 0.97 with the lexical checks below merges restatements ("… mean a lot" / "… really mean a lot").
DUPLICATE_COSINE = fitted.DUPLICATE_COSINE.value  # retrieval/fitted.py: fitted on, date, command
DUPLICATE_MIN_JACCARD = 0.6  # share of distinct content terms the two statements have in common
# Below this, two facts are about different things even when a pattern matches both
# ("Caroline lives in fear of…" is no address).
SUPERSEDE_MIN_COSINE = 0.80
# Older facts fetched per new fact from the vector index (duplicates and supersede candidates).
NEIGHBOURS = 5

@dataclass
class FactPlan:
    index: int  # position in the extracted facts
    duplicate_of: Memory | None = None  # merge into this one instead of creating a row
    supersedes: list[Memory] = field(default_factory=list)


@dataclass
class Recent:
    """Facts written earlier in this call, with their vectors: the index may not hold them yet."""

    memories: list[Memory] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)

    def add(self, memory: Memory, vector: np.ndarray) -> None:
        self.memories.append(memory)
        self.vectors.append(vector)

    def nearest(self, vector: np.ndarray) -> tuple[Memory | None, float]:
        if not self.vectors:
            return None, -1.0
        sims = np.vstack(self.vectors) @ vector
        best = int(np.argmax(sims))
        return self.memories[best], float(sims[best])


def near_duplicates(a: str, b: str, subject_a: str, subject_b: str) -> bool:
    """The lexical half of the near-duplicate test (the caller has checked the cosine).

    The day a statement was made (`dates.dated`) is left out: said again a week later, it is the same fact.
    """
    if subject_a != subject_b:
        return False
    a, b = undated(a), undated(b)
    ta, tb = set(tokenize(a)), set(tokenize(b))
    if {t for t in ta if any(c.isdigit() for c in t)} != {t for t in tb if any(c.isdigit() for c in t)}:
        return False
    return len(ta & tb) / max(1, len(ta | tb)) >= DUPLICATE_MIN_JACCARD


def plan_facts(kb, user_id: str, texts: list[str], vectors: np.ndarray, recent: Recent,
               subjects: list[str] | None = None, notes: list[bool] | None = None, *,
               agent_id: str = "") -> list[FactPlan]:
    """What to do with each new fact text of one segment (see the module docstring).

    A `notes` fact ("Caroline shares a photo of a dog") records an event, not a statement: two
    photos with alike captions are two photos, so it is neither merged nor a merge target.
    """
    subjects = subjects or [""] * len(texts)
    notes = notes or [False] * len(texts)
    hashes = [Memory.hash_text(t) for t in texts]
    # Only facts of the same agent scope merge or supersede: an agent's memory stays that agent's.
    scope = Memory.objects.filter(tenant_id=kb.tenant_id, kb=kb, user_id=user_id, kind=Memory.Kind.ATOMIC_FACT,
                                  status=Memory.Status.ACTIVE, agent_id=agent_id)
    by_hash = {m.content_hash: m for m in scope.filter(content_hash__in=set(hashes))}
    by_hash.update({m.content_hash: m for m in recent.memories if m.content_hash in set(hashes)})
    plans, similar_for = [], {}
    hashed = {i for i, digest in enumerate(hashes)
              if digest in by_hash and not (by_hash[digest].metadata or {}).get("note")}
    # The index holds none of this segment's facts yet, so every fact's neighbours come from one request.
    searched = _index_neighbours(kb, user_id, [vectors[i] for i in range(len(texts))
                                                if not notes[i] and i not in hashed], agent_id)
    for i, (text, digest) in enumerate(zip(texts, hashes)):
        if notes[i]:
            plans.append(FactPlan(i))
            continue
        if i in hashed:
            plans.append(FactPlan(i, duplicate_of=by_hash[digest]))
            continue
        neighbours = searched.pop(0)
        near, score = recent.nearest(vectors[i])
        if near is not None:
            neighbours.append((near, score))
        same = [(m, sim) for m, sim in neighbours if sim >= DUPLICATE_COSINE and not (m.metadata or {}).get("note")
                and near_duplicates(text, m.text, subjects[i], (m.metadata or {}).get("subject", ""))]
        if same:
            plans.append(FactPlan(i, duplicate_of=max(same, key=lambda pair: pair[1])[0]))
            continue
        plans.append(FactPlan(i))
        similar_for[i] = [m for m, s in neighbours if s >= SUPERSEDE_MIN_COSINE]
    _plan_supersedes(kb, user_id, texts, vectors, plans, similar_for, agent_id, subjects)
    return plans


def _index_neighbours(kb, user_id: str, vectors: list[np.ndarray], agent_id: str = "") -> list[list[tuple[Memory, float]]]:
    """The active facts of the user most similar to each vector (at least SUPERSEDE_MIN_COSINE), in one search."""
    if not vectors:
        return []
    exclusive = kb.tenant.isolation == Tenant.Isolation.EXCLUSIVE
    flt = IndexFilter(tenant_id=kb.tenant_id, kb_ids=(kb.pk,), exclusive=exclusive, kinds=("atomic_fact",),
                      user_id=user_id, agent_id=agent_id)
    found = vector_index().search_many([[float(x) for x in v] for v in vectors], flt, NEIGHBOURS,
                                       min_score=SUPERSEDE_MIN_COSINE)
    pks = [[h.id.split(":", 1)[1] for h in hits] for hits in found]
    rows = {str(m.pk): m for m in Memory.objects.filter(pk__in={pk for row in pks for pk in row},
                                                        status=Memory.Status.ACTIVE)}
    return [[(rows[pk], h.score) for pk, h in zip(row, hits) if pk in rows] for row, hits in zip(pks, found)]


def _plan_supersedes(kb, user_id, texts, vectors, plans: list[FactPlan], similar_for: dict[int, list[Memory]],
                     agent_id: str = "", subjects: list[str] | None = None) -> None:
    from django.conf import settings

    fresh = [p for p in plans if p.duplicate_of is None]
    if not fresh:
        return
    if getattr(settings, "LLM_ENABLED", False) and any(similar_for.get(p.index) for p in fresh):
        try:
            return _llm_supersedes(texts, plans, similar_for)
        except Exception as exc:  # LlmError or a reply that names no known fact: the heuristic still works
            log.warning("LLM supersede check failed, using the pattern heuristic: %s", exc)
    heads = readings(np.asarray([vectors[p.index] for p in fresh])) if head_applies() else None
    for n, plan in enumerate(fresh):
        subject = subjects[plan.index] if subjects else ""
        text, reading = texts[plan.index], heads[n] if heads is not None else None
        new_claim = claim(text)
        rule_claim = new_claim is not None and new_claim.attribute.split(":")[0] in RULE_ATTRIBUTES
        if not (changes_state(read(text, subject), reading) or rule_claim):
            continue
        # The nearest older facts (already at least SUPERSEDE_MIN_COSINE): all three readers, the e5
        # head's from their vectors too.
        near = [m for m in similar_for.get(plan.index, []) if _same_subject(m, subject)]
        near_readings = readings(_embed([m.text for m in near])) if near and heads is not None else [None] * len(near)
        plan.supersedes = [m for m, r in zip(near, near_readings) if supersedes(text, m.text, subject, reading, r)]
        # The subject's other active facts: the token model and the patterns, then the same cosine gate.
        who = subject or (new_claim.subject if new_claim else "")
        candidates = Memory.objects.filter(tenant_id=kb.tenant_id, kb=kb, user_id=user_id, kind=Memory.Kind.ATOMIC_FACT,
                                           status=Memory.Status.ACTIVE, agent_id=agent_id)
        if who:
            candidates = candidates.filter(text__icontains=who)
        olds = [m for m in candidates.exclude(pk__in=[m.pk for m in near])
                if _same_subject(m, subject) and supersedes(text, m.text, subject, reading)]
        if olds:
            old_vectors = _embed([m.text for m in olds])
            plan.supersedes += [m for m, v in zip(olds, old_vectors)
                                if float(v @ vectors[plan.index]) >= SUPERSEDE_MIN_COSINE]


def _same_subject(memory: Memory, subject: str) -> bool:
    meta = memory.metadata or {}
    return meta.get("subject", subject) == subject and not meta.get("note") and memory.status == Memory.Status.ACTIVE


SUPERSEDE_PROMPT = """Older facts about a user are listed with letters, new facts with numbers.
For each new fact, list the older facts it makes out of date: the same subject and the same attribute
(where someone lives, works, a favourite, a relationship status, a plan) now with a different value.
Facts that only add detail or are about something else are not out of date.

Older facts:
{old}

New facts:
{new}

Reply with only a JSON object: {{"superseded": [{{"new": <number>, "old": [<letters>]}}]}}"""


def _llm_supersedes(texts, plans: list[FactPlan], similar_for: dict[int, list[Memory]]) -> None:
    from common.llm import complete_json

    olds: dict[str, Memory] = {}
    for memories in similar_for.values():
        for m in memories:
            olds.setdefault(str(m.pk), m)
    letters = {_letter(i): m for i, m in enumerate(olds.values())}
    numbered = {n: p for n, p in enumerate((p for p in plans if p.index in similar_for), start=1)}
    prompt = SUPERSEDE_PROMPT.format(old="\n".join(f"{k}. {m.text}" for k, m in letters.items()),
                                     new="\n".join(f"{n}. {texts[p.index]}" for n, p in numbered.items()))

    def check(obj):
        for item in obj["superseded"]:
            if item["new"] not in numbered or any(k not in letters for k in item["old"]):
                raise ValueError("a reply names a fact that was not listed")

    # The schema names the listed facts only: a decoder that follows it cannot cite another.
    schema = {"type": "object", "additionalProperties": False, "required": ["superseded"], "properties": {
        "superseded": {"type": "array", "maxItems": len(numbered), "items": {
            "type": "object", "additionalProperties": False, "required": ["new", "old"], "properties": {
                "new": {"enum": list(numbered)},
                "old": {"type": "array", "maxItems": len(letters), "items": {"enum": list(letters)}}}}}}}
    reply = complete_json([{"role": "user", "content": prompt}], schema_check=check, temperature=0.0,
                          step="supersede", schema=schema)
    for item in reply["superseded"]:
        numbered[item["new"]].supersedes = [letters[k] for k in dict.fromkeys(item["old"])]


def _letter(i: int) -> str:
    return chr(ord("A") + i % 26) + (str(i // 26) if i >= 26 else "")


def _embed(texts: list[str]) -> np.ndarray:
    return embedder().embed_documents(texts)
