"""Candidate-question rows: each fact's and child chunk's questions (retrieval/questions), indexed as
rows of kind "question" that carry their source's id as parent and its scope (tenant, KB, document,
user, session, agents, metadata, status), so every filter that narrows or deletes the source's rows
narrows or deletes them too. Their ids are their source's and an ordinal (`question:chunk:12:0`), so a
removal by source ids names them without reading the index."""

from dataclasses import replace
from typing import Iterable, Iterator

from retrieval import questions
from retrieval.backends.base import IndexRow

PREFIX = "question:"
SOURCE_KINDS = ("chunk", "atomic_fact")


def question_key(source_id: str, n: int) -> str:
    return f"{PREFIX}{source_id}:{n}"


def question_keys(source_id: str) -> list[str]:
    """Every id a question of `source_id` may have (whether written or not)."""
    return [question_key(source_id, n) for n in range(questions.MAX_QUESTIONS)]


def source_key(row_id: str) -> str:
    """The row a question row points back to; any other row's own id."""
    return row_id[len(PREFIX):].rsplit(":", 1)[0] if row_id.startswith(PREFIX) else row_id


def question_rows(source: IndexRow) -> list[IndexRow]:
    if source.kind not in SOURCE_KINDS:
        return []
    return [replace(source, id=question_key(source.id, n), kind="question", text=q, parent_id=source.id, vector=None,
                    metadata=dict(source.metadata))
            for n, q in enumerate(questions.questions_for(source.text))]


def with_questions(rows: Iterable[IndexRow]) -> Iterator[IndexRow]:
    """Each row followed by its questions, when candidate questions are on."""
    on = questions.enabled()
    for row in rows:
        yield row
        if on:
            yield from question_rows(row)
