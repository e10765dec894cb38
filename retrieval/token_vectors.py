"""The late-interaction projection: ColBERT token vectors (int8) of every English memory and chunk.

A table of the relational database (retrieval.models.TokenVectors), written beside the vector and
keyword rows (projection/writes.py), so it is exact across processes with no file to keep in step:
- written from the same IndexRow text the indexes hold, for the kinds hybrid returns, only when the
  text is English (`script(text) == "latin"`): Chinese and mixed text is left to the other scores;
- deleted by every removal (projection/removal.py's delete_everywhere passes its filter here), and by the
  foreign keys' cascade when the memory, chunk, document, KB or tenant row goes;
- rebuilt by `reindex` (a row whose text and model are unchanged is kept, not re-encoded), checked
  and repaired by `reconcile` (missing, stale text, another model, rows of inactive memories).
Rows carry the model's identity (retrieval/colbert.py `ColbertModel.name`: weights' sha256 and the
cut): vectors of another model are never read, so a change of model never mixes spaces.
"""

import hashlib
from typing import Iterable

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Q

from memory.models import Chunk, Memory
from retrieval.backends.base import IndexFilter, IndexRow
from retrieval.models import TokenVectors
from retrieval.relevance import script

KINDS = ("atomic_fact", "episode", "chunk")
WRITE_BATCH = 256


def enabled() -> bool:
    return bool(settings.SEARCH_LATE_INTERACTION)


def model():
    from retrieval import colbert

    # One thread: a second one doubled the CPU per text (31.6 against 15.4 CPU-ms on LoCoMo turns,
    # bench/RESULTS.md) for little wall time, and ingestion CPU is what the projection must keep low.
    return colbert.model(threads=1)


def wanted(row: IndexRow) -> bool:
    return row.kind in KINDS and script(row.text) == "latin"


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _split(row_id: str) -> tuple[str, str]:
    kind, _, pk = row_id.partition(":")  # memory pks are UUIDs, chunk pks integers: both kept as text
    return kind, pk


def _owner(row_id: str) -> dict:
    kind, pk = _split(row_id)
    return {"memory_id": pk} if kind == "memory" else {"chunk_id": pk}


def write(rows: Iterable[IndexRow]) -> int:
    """Encode and store the English rows whose vectors are missing or stale; drop the others' vectors."""
    if not enabled():
        return 0
    rows = list(rows)
    name = model().name
    english = {r.id: r for r in rows if wanted(r)}
    other = [r.id for r in rows if r.id not in english]
    if other:
        _delete_ids(other)
    if not english:
        return 0
    current = set(_present(list(english), name, with_sha=True))
    todo = [r for r in english.values() if (r.id, text_sha(r.text)) not in current]
    written = 0
    for start in range(0, len(todo), WRITE_BATCH):
        batch = todo[start:start + WRITE_BATCH]
        matrices = model().encode_documents([r.text for r in batch])
        written += _store(batch, matrices, name)
    return written


def _store(batch: list[IndexRow], matrices, name: str) -> int:
    from retrieval.colbert import quantise

    memory_pks = [_split(r.id)[1] for r in batch if r.id.startswith("memory:")]
    chunk_pks = [_split(r.id)[1] for r in batch if r.id.startswith("chunk:")]
    with transaction.atomic():
        # Only rows whose owner is still there: a memory deleted while we encoded gets no vectors.
        live_memories = {str(pk) for pk in Memory.objects.select_for_update().filter(pk__in=memory_pks)
                         .values_list("pk", flat=True)}
        live_chunks = {str(pk) for pk in Chunk.objects.select_for_update().filter(pk__in=chunk_pks)
                       .values_list("pk", flat=True)}
        keep = [(r, m) for r, m in zip(batch, matrices)
                if _split(r.id)[1] in (live_memories if r.id.startswith("memory:") else live_chunks)]
        owners = _owners_q([r.id for r, _ in keep])
        if owners is not None:
            TokenVectors.objects.filter(owners, model=name).delete()
        TokenVectors.objects.bulk_create([
            TokenVectors(**_owner(r.id), model=name, text_sha=text_sha(r.text), tokens=len(m),
                         data=quantise(m).tobytes()) for r, m in keep])
    return len(keep)


def _owners_q(ids: list[str]) -> Q | None:
    memories = [_split(i)[1] for i in ids if i.startswith("memory:")]
    chunks = [_split(i)[1] for i in ids if i.startswith("chunk:")]
    if not memories and not chunks:
        return None
    return Q(memory_id__in=memories) | Q(chunk_id__in=chunks)


def _present(ids: list[str], name: str, *, with_sha: bool = False):
    q = _owners_q(ids)
    if q is None:
        return []
    rows = TokenVectors.objects.filter(q, model=name).values_list("memory_id", "chunk_id", "text_sha")
    out = []
    for memory_id, chunk_id, sha in rows:
        key = f"memory:{memory_id}" if memory_id else f"chunk:{chunk_id}"
        out.append((key, sha) if with_sha else key)
    return out


def load(ids: list[str], name: str) -> dict[str, np.ndarray]:
    """Stored int8 token matrices of these index ids (rows of `name` only)."""
    q = _owners_q(ids)
    if q is None:
        return {}
    out = {}
    for memory_id, chunk_id, tokens, data in TokenVectors.objects.filter(q, model=name).values_list(
            "memory_id", "chunk_id", "tokens", "data"):
        key = f"memory:{memory_id}" if memory_id else f"chunk:{chunk_id}"
        out[key] = np.frombuffer(bytes(data), dtype=np.int8).reshape(tokens, -1)
    return out


def _delete_ids(ids: list[str]) -> None:
    q = _owners_q(ids)
    if q is not None:
        TokenVectors.objects.filter(q).delete()


def _selecting(flt: IndexFilter) -> Q:
    """The stored rows of the index rows `flt` selects (any status: the removal filters' meaning)."""
    memory = Q(memory__tenant_id=flt.tenant_id, memory__kb_id__in=flt.kb_ids)
    chunk = Q(chunk__document__kb__tenant_id=flt.tenant_id, chunk__document__kb_id__in=flt.kb_ids)
    if flt.ids:
        owners = _owners_q(list(flt.ids)) or Q(pk__in=[])
        memory &= owners
        chunk &= owners
    if flt.document_ids:
        memory &= Q(memory__document_id__in=flt.document_ids)
        chunk &= Q(chunk__document_id__in=flt.document_ids)
    if flt.user_id is not None or flt.session_id is not None:  # only memories carry a user and session
        chunk = Q(pk__in=[])
        if flt.user_id is not None:
            memory &= Q(memory__user_id=flt.user_id)
        if flt.session_id is not None:
            memory &= Q(memory__session_id=flt.session_id)
    return memory | chunk


def delete(flt: IndexFilter) -> None:
    """Remove the vectors of the index rows `flt` selects (the removal filters of retrieval/projection/removal.py)."""
    TokenVectors.objects.filter(_selecting(flt)).delete()


def count(flt: IndexFilter) -> int:
    return TokenVectors.objects.filter(_selecting(flt)).count()


def drop_other_models() -> int:
    """After a reindex: the rows of any model but the current one (a changed model's leftovers)."""
    if not enabled():
        return 0
    return TokenVectors.objects.exclude(model=model().name).delete()[0]


def reconcile(expected: dict[str, IndexRow], tenant_id: int, *, repair: bool) -> dict:
    """Compare the stored vectors of a tenant with its expected rows; with repair, write and drop."""
    if not enabled():
        return {"enabled": False}
    name = model().name
    want = {i: text_sha(r.text) for i, r in expected.items() if wanted(r)}
    stored = TokenVectors.objects.filter(Q(memory__tenant_id=tenant_id) | Q(chunk__document__kb__tenant_id=tenant_id))
    present: dict[str, str] = {}
    stale_pks = []
    for pk, memory_id, chunk_id, model_name, sha in stored.values_list("pk", "memory_id", "chunk_id", "model",
                                                                          "text_sha"):
        key = f"memory:{memory_id}" if memory_id else f"chunk:{chunk_id}"
        if model_name == name and want.get(key) == sha:
            present[key] = sha
        else:
            stale_pks.append(pk)  # another model, an edited text, or an item no longer expected
    missing = sorted(want.keys() - present.keys())
    report = {"expected": len(want), "missing": len(missing), "stale": len(stale_pks),
              "sample_missing": missing[:5]}
    if repair:
        TokenVectors.objects.filter(pk__in=stale_pks).delete()
        write(expected[i] for i in missing)
    report["repaired"] = bool(repair and (missing or stale_pks))
    return report
