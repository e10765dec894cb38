"""Removing index rows: of memories, chunks, a document, knowledge bases, a user's or a session's scope.

Every removal clears both places, the shared set and the tenant's exclusive one: a tenant's rows may
sit in either (an isolation switch under way, or one that died half-way), and a delete must not
depend on which. Each takes ids, not model instances, so it can run after the commit that deleted
the rows it is named after, and running it again removes nothing more. Every build that must have
the delete gets it (retrieval/builds.py): the live one and the one an online reindex is building.
"""

from dataclasses import replace
from typing import Iterable

from retrieval import builds
from retrieval.backends import token_vectors
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter, IndexRow
from retrieval.projection.questions import question_keys
from retrieval.projection.rows import chunk_key, memory_key, rows_of

REMOVE_BATCH = 500  # ids per delete call: a Milvus expression and an SQL IN list stay small


def remove_memory_rows(tenant_id: int, kb_ids, memory_pks) -> None:
    for ids in batches(with_question_keys(memory_key(pk) for pk in memory_pks)):
        delete_everywhere(rows_of(tenant_id, kb_ids, ids=ids))


def remove_chunk_rows(tenant_id: int, kb_id: int, chunk_pks) -> None:
    for ids in batches(with_question_keys(chunk_key(pk) for pk in chunk_pks)):
        delete_everywhere(rows_of(tenant_id, (kb_id,), ids=ids))


def with_question_keys(keys: Iterable[str]) -> list[str]:
    """Source ids and the ids of their candidate questions: removed whether the setting is on or not,
    so turning it off never strands a question of a deleted source."""
    return [k for key in keys for k in (key, *question_keys(key))]


def remove_document_rows(tenant_id: int, kb_id: int, document_id: int) -> None:
    delete_everywhere(rows_of(tenant_id, (kb_id,), document_ids=(document_id,)))


def remove_kb_rows(tenant_id: int, kb_ids) -> None:
    """Every row of these knowledge bases (of a tenant that may itself be gone)."""
    if kb_ids:
        delete_everywhere(rows_of(tenant_id, kb_ids))


def remove_scope_rows(tenant_id: int, kb_ids, *, user_id=None, session_id=None) -> None:
    if kb_ids:
        delete_everywhere(rows_of(tenant_id, kb_ids, user_id=user_id, session_id=session_id))


def remove_ids(tenant_id: int, rows: list[IndexRow]) -> None:
    """These rows, and the candidate questions of any source among them."""
    by_kb: dict[int, list[str]] = {}
    for r in rows:
        by_kb.setdefault(r.kb_id, []).extend([r.id] if r.kind == "question" else with_question_keys([r.id]))
    for kb_id, ids in by_kb.items():
        for chunk in batches(ids):
            delete_everywhere(rows_of(tenant_id, (kb_id,), ids=chunk))


def delete_everywhere(flt: IndexFilter) -> None:
    for exclusive in (False, True):
        delete_in(flt, exclusive)
    token_vectors.delete(flt)  # one place for every build: its rows name their model


def delete_in(flt: IndexFilter, exclusive: bool) -> None:
    """Delete in one place (shared or exclusive) of every build that must have the delete."""
    flt = replace(flt, exclusive=exclusive)
    for build in builds.current().targets():
        vector_index(build=build.number).delete(flt)
        keyword_index(build=build.number).delete(flt)


def batches(ids: list[str]) -> Iterable[tuple[str, ...]]:
    for start in range(0, len(ids), REMOVE_BATCH):
        yield tuple(ids[start:start + REMOVE_BATCH])
