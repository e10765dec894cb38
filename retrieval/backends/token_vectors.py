"""The late-interaction projection: ColBERT token vectors (int8) of the sources memories are drawn from.

A table of the relational database (retrieval.models.TokenVectors), written beside the vector and
keyword rows (projection/writes.py), so it is exact across processes with no file to keep in step.
What is encoded is each **source** once: a chat message ("sender: content"), and for a memory that
cites none and has no document (one made through the API) the memory's own text. A fact or an
episode is then scored by the best of its sources (retrieval/search/late_interaction.py); documents'
chunks, facts and episodes are not (they lost on English documents) and keep hybrid's relevance.
Encoding every fact and episode instead cost +52 % of LoCoMo ingestion CPU (facts and episodes are
2.2 texts per message); a message is encoded once however many memories cite it, and its MaxSim
scored better on multi-hop questions (bench/RESULTS.md, "Late interaction … session 9").

- written when a memory row is indexed, only for English text (`script(text) == "latin"`); rows of
  chunks (written before session 9) are stale to reconcile and go with every delete path as before;
- deleted by every removal (projection/removal.py's delete_everywhere passes its filter here: a KB,
  a document, a user's or a session's rows) and by the foreign keys' cascade when the message,
  memory, chunk, document, KB or tenant row goes;
- rebuilt by `reindex` (a row whose text and model are unchanged is kept, not re-encoded), checked
  and repaired by `reconcile` (missing, stale text, another model, sources no longer wanted).
Rows carry the model's identity (retrieval/runtimes/colbert.py `ColbertModel.name`: weights' sha256 and the
cut): vectors of another model are never read, so a change of model never mixes spaces.

Keys: "memory:<uuid>", "chunk:<pk>" (the index rows' own ids) and "message:<pk>".
"""

import hashlib
from collections import defaultdict
from typing import Iterable

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Q

from memory.models import Chunk, Memory, Message
from retrieval.backends import token_codes
from retrieval.backends.base import IndexFilter, IndexRow
from retrieval.models import TokenVectors
from retrieval.relevance import script

KINDS = ("atomic_fact", "episode", "chunk")
WRITE_BATCH = 256
LOOKUP_BATCH = 500  # memories per sources() query: under SQLite's bound-parameter limit
OWNERS = {"memory": "memory_id", "chunk": "chunk_id", "message": "message_id"}


def enabled() -> bool:
    return bool(settings.SEARCH_LATE_INTERACTION)


def model():
    from retrieval.runtimes import colbert

    # One thread: a second one doubled the CPU per text (31.6 against 15.4 CPU-ms on LoCoMo turns,
    # bench/RESULTS.md) for little wall time, and ingestion CPU is what the projection must keep low.
    return colbert.model(threads=1)


def wanted(row: IndexRow) -> bool:
    return row.kind in KINDS and script(row.text) == "latin"


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def message_text(message: Message) -> str:
    """What is encoded of a message: who said it, then what (a question names the speaker)."""
    return f"{message.sender_name}: {message.content}" if message.sender_name else message.content


def _split(key: str) -> tuple[str, str]:
    kind, _, pk = key.partition(":")  # memory pks are UUIDs, chunk and message pks integers: all kept as text
    return kind, pk


def _key(memory_id, chunk_id, message_id) -> str:
    if memory_id:
        return f"memory:{memory_id}"
    return f"chunk:{chunk_id}" if chunk_id else f"message:{message_id}"


# --- sources

def sources(memory_pks: Iterable[str]) -> dict[str, list[str]]:
    """Each memory's source keys: its cited messages; itself if it cites none and has no document (one
    made through the API). A document's memory has none and keeps hybrid's relevance: on English
    documents MaxSim of chunks lost first items (a long chunk has a close token for every query token;
    bench/RESULTS.md, "Late interaction by source messages … session 9"). Two queries for any number
    of memories (the stage asks this on every search)."""
    memory_pks = list(memory_pks)
    out: dict[str, list[str]] = {}
    by_session: dict[tuple, set[str]] = defaultdict(set)
    cited: dict[str, tuple] = {}
    own = set()
    for pk, kb_id, user_id, session_id, message_ids, document_id in Memory.objects.filter(
            pk__in=memory_pks).values_list("pk", "kb_id", "user_id", "session_id", "source_message_ids", "document_id"):
        if message_ids:
            by_session[(kb_id, user_id, session_id)].update(message_ids)
            cited[str(pk)] = ((kb_id, user_id, session_id), list(message_ids))
        elif not document_id:
            own.add(str(pk))
        out[str(pk)] = []
    if by_session:
        q = Q(pk__in=[])
        for (kb_id, user_id, session_id), ids in by_session.items():
            q |= Q(kb_id=kb_id, user_id=user_id, session_id=session_id, message_id__in=ids)
        found = {(kb_id, user_id, session_id, mid): pk for pk, kb_id, user_id, session_id, mid in
                 Message.objects.filter(q).values_list("pk", "kb_id", "user_id", "session_id", "message_id")}
        for pk, (where, ids) in cited.items():
            out[pk] = [f"message:{found[(*where, m)]}" for m in ids if (*where, m) in found]
    return {pk: keys or ([f"memory:{pk}"] if pk in own else []) for pk, keys in out.items()}


def stored_sources(memory_pks: list[str]):
    """The model (`model`), each memory's source keys (`sources`) and the model's stored matrices of all
    of them (`load`): what the late-interaction stage reads, in one call."""
    colbert_model = model()
    of_memory = sources(memory_pks) if memory_pks else {}
    keys = list(dict.fromkeys(k for keys in of_memory.values() for k in keys))
    return colbert_model, of_memory, load(keys, colbert_model.name)


def texts(keys: Iterable[str], own: dict[str, str] | None = None) -> dict[str, str]:
    """The text each source key stands for (a memory's is its index row's text, from `own`)."""
    keys = list(keys)
    pks = defaultdict(list)
    for key in keys:
        kind, pk = _split(key)
        pks[kind].append(pk)
    out = {}
    if pks["message"]:
        for m in Message.objects.filter(pk__in=pks["message"]).only("pk", "sender_name", "content"):
            out[f"message:{m.pk}"] = message_text(m)
    if pks["chunk"]:
        for pk, text in Chunk.objects.filter(pk__in=pks["chunk"]).values_list("pk", "text"):
            out[f"chunk:{pk}"] = text
    own = own or {}
    missing = [pk for pk in pks["memory"] if f"memory:{pk}" not in own]
    for pk, text in Memory.objects.filter(pk__in=missing).values_list("pk", "text"):
        out[f"memory:{pk}"] = text
    out.update({k: v for k, v in own.items() if k in set(keys)})
    return out


def _wanted_sources(rows: list[IndexRow]) -> dict[str, str]:
    """Source key → text of the English sources these index rows are scored by."""
    rows = [r for r in rows if r.kind in KINDS]
    out = {}
    for start in range(0, len(rows), LOOKUP_BATCH):  # a tenant's reconcile passes all its rows
        batch = rows[start:start + LOOKUP_BATCH]
        keys = {k for ks in sources(_split(r.id)[1] for r in batch if r.id.startswith("memory:")).values()
                for k in ks}
        out.update(texts(keys, {r.id: r.text for r in batch}))
    return {k: t for k, t in out.items() if script(t) == "latin"}


# --- writes

def write(rows: Iterable[IndexRow]) -> int:
    """Encode and store the English sources of these rows whose vectors are missing or stale."""
    if not enabled():
        return 0
    rows = list(rows)
    want = _wanted_sources(rows)
    # A row scored by its sources, or no longer English (an edit), keeps no vectors of its own.
    drop = [r.id for r in rows if r.id not in want]
    if drop:
        _delete_keys(drop)
    return _encode_missing(want)


def _encode_missing(want: dict[str, str]) -> int:
    if not want:
        return 0
    name = model().name
    current = set(_present(list(want), name))
    todo = [(k, t) for k, t in want.items() if (k, text_sha(t)) not in current]
    written = 0
    for start in range(0, len(todo), WRITE_BATCH):
        batch = todo[start:start + WRITE_BATCH]
        matrices = model().encode_documents([t for _, t in batch])
        written += _store(batch, matrices, name)
    return written


def _store(batch: list[tuple[str, str]], matrices, name: str) -> int:
    from retrieval.runtimes.colbert import quantise

    pks = defaultdict(list)
    for key, _ in batch:
        kind, pk = _split(key)
        pks[kind].append(pk)
    with transaction.atomic():
        # Only rows whose owner is still there: a memory deleted while we encoded gets no vectors.
        live = set()
        for kind, manager in (("memory", Memory.objects), ("chunk", Chunk.objects), ("message", Message.objects)):
            if pks[kind]:
                live |= {f"{kind}:{pk}" for pk in manager.select_for_update().filter(pk__in=pks[kind])
                         .values_list("pk", flat=True)}
        keep = [(k, t, m) for (k, t), m in zip(batch, matrices) if k in live]
        owners = _owners_q([k for k, _, _ in keep])
        if owners is not None:
            TokenVectors.objects.filter(owners, model=name).delete()
        TokenVectors.objects.bulk_create([
            TokenVectors(**{OWNERS[_split(k)[0]]: _split(k)[1]}, model=name, text_sha=text_sha(t), tokens=len(m),
                         data=quantise(m).tobytes()) for k, t, m in keep])
    token_codes.written([_split(k)[1] for k, _, _ in keep if k.startswith("message:")], name)
    return len(keep)


def _owners_q(keys: list[str]) -> Q | None:
    pks = defaultdict(list)
    for key in keys:
        kind, pk = _split(key)
        if kind in OWNERS:
            pks[kind].append(pk)
    if not pks:
        return None
    q = Q(pk__in=[])
    for kind, values in pks.items():
        q |= Q(**{f"{OWNERS[kind]}__in": values})
    return q


def _present(keys: list[str], name: str) -> list[tuple[str, str]]:
    q = _owners_q(keys)
    if q is None:
        return []
    return [(_key(mem, chunk, msg), sha) for mem, chunk, msg, sha in
            TokenVectors.objects.filter(q, model=name).values_list("memory_id", "chunk_id", "message_id", "text_sha")]


def load(keys: list[str], name: str) -> dict[str, np.ndarray]:
    """Stored int8 token matrices of these source keys (rows of `name` only)."""
    q = _owners_q(keys)
    if q is None:
        return {}
    out = {}
    for mem, chunk, msg, tokens, data in TokenVectors.objects.filter(q, model=name).values_list(
            "memory_id", "chunk_id", "message_id", "tokens", "data"):
        out[_key(mem, chunk, msg)] = token_codes.stored_matrix(tokens, data)
    return out


def _delete_keys(keys: list[str]) -> None:
    q = _owners_q(keys)
    if q is not None:
        TokenVectors.objects.filter(q).delete()


# --- removal and reconcile

def _selecting(flt: IndexFilter) -> Q:
    """The stored rows of the index rows `flt` selects (any status: the removal filters' meaning), and
    of the messages of its user or session (a document's or one memory's removal keeps its messages)."""
    memory = Q(memory__tenant_id=flt.tenant_id, memory__kb_id__in=flt.kb_ids)
    chunk = Q(chunk__document__kb__tenant_id=flt.tenant_id, chunk__document__kb_id__in=flt.kb_ids)
    message = Q(message__tenant_id=flt.tenant_id, message__kb_id__in=flt.kb_ids)
    if flt.ids:
        owners = _owners_q(list(flt.ids)) or Q(pk__in=[])
        memory &= owners
        chunk &= owners
        message = Q(pk__in=[])
    if flt.document_ids:
        memory &= Q(memory__document_id__in=flt.document_ids)
        chunk &= Q(chunk__document_id__in=flt.document_ids)
        message = Q(pk__in=[])
    if flt.user_id is not None or flt.session_id is not None:  # only memories and messages carry them
        chunk = Q(pk__in=[])
        if flt.user_id is not None:
            memory &= Q(memory__user_id=flt.user_id)
            message &= Q(message__user_id=flt.user_id)
        if flt.session_id is not None:
            memory &= Q(memory__session_id=flt.session_id)
            message &= Q(message__session_id=flt.session_id)
    return memory | chunk | message


def delete(flt: IndexFilter) -> None:
    """Remove the vectors of the index rows `flt` selects (the removal filters of retrieval/projection/removal.py)."""
    TokenVectors.objects.filter(_selecting(flt)).delete()
    # Not only when rows went here: a user's messages are often gone already (their foreign keys' cascade).
    if not (flt.ids or flt.document_ids):  # those select no message's rows (_selecting)
        token_codes.removed(flt.tenant_id, flt.kb_ids)


def count(flt: IndexFilter) -> int:
    return TokenVectors.objects.filter(_selecting(flt)).count()


def drop_other_models() -> int:
    """After a reindex: the rows of any model but the current one (a changed model's leftovers)."""
    if not enabled():
        return 0
    return TokenVectors.objects.exclude(model=model().name).delete()[0]


def reconcile(expected: dict[str, IndexRow], tenant_id: int, *, repair: bool) -> dict:
    """Compare the stored vectors of a tenant with the sources its expected rows are scored by; with
    repair, write the missing and drop the stale."""
    if not enabled():
        return {"enabled": False}
    name = model().name
    source_texts = _wanted_sources(list(expected.values()))
    want = {k: text_sha(t) for k, t in source_texts.items()}
    stored = TokenVectors.objects.filter(Q(memory__tenant_id=tenant_id) | Q(chunk__document__kb__tenant_id=tenant_id)
                                         | Q(message__tenant_id=tenant_id))
    present: dict[str, str] = {}
    stale_pks = []
    for pk, mem, chunk, msg, model_name, sha in stored.values_list("pk", "memory_id", "chunk_id", "message_id",
                                                                   "model", "text_sha"):
        key = _key(mem, chunk, msg)
        if model_name == name and want.get(key) == sha:
            present[key] = sha
        else:
            stale_pks.append(pk)  # another model, an edited text, or a source no longer wanted
    missing = sorted(want.keys() - present.keys())
    report = {"model": name, "expected": len(want), "missing": len(missing), "stale": len(stale_pks),
              "sample_missing": missing[:5]}
    if repair:
        TokenVectors.objects.filter(pk__in=stale_pks).delete()
        _encode_missing({k: source_texts[k] for k in missing})
    report["repaired"] = bool(repair and (missing or stale_pks))
    return report
