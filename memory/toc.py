"""A document's table of contents, read from its parent chunks' `section_path` (issue 39).

Every parser already cuts along headings, sections, slides and sheets, and each parent chunk keeps
the path of titles it sits under. The tree is that list folded: one node per distinct path prefix,
in reading order. It is computed from the chunk rows on each read, not stored: the rows are the
source of truth, replaced whenever the document is parsed again and removed with it, so a stored
copy would only be a second thing to keep in step. A read is one query over the parent chunks
(a few hundred rows for a long document); the section search bounds its own scan
(retrieval/search/toc.py's MAX_SECTION_ROWS).
"""

import re
from dataclasses import dataclass, field

from django.db.models.functions import Substr

from memory.models import Chunk

SUMMARY_CHARS = 300  # a section's summary: its first sentences up to this many characters
HEAD_CHARS = 600  # characters of a parent chunk read for its summary (the heading line comes first)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


@dataclass
class Section:
    """One node of a document's table of contents: a path of titles and the parent chunks under it."""

    document_id: int
    path: tuple[str, ...]
    parent_ids: list[int] = field(default_factory=list)  # its own and its subsections', in reading order
    summary: str = ""  # the first sentences of its first text
    children: list["Section"] = field(default_factory=list)

    @property
    def title(self) -> str:
        return self.path[-1] if self.path else ""

    @property
    def depth(self) -> int:
        return len(self.path)

    @property
    def first_chunk_id(self) -> int | None:
        return self.parent_ids[0] if self.parent_ids else None


def parent_rows(chunks, limit: int | None = None) -> list[tuple]:
    """(pk, document_id, path, head text) of parent chunks from a Chunk queryset, each document's in
    reading order, the newest document first; at most `limit` rows."""
    rows = chunks.filter(level=Chunk.Level.PARENT).order_by("-document_id", "ordinal").values_list(
        "pk", "document_id", "section_path", "metadata", Substr("text", 1, HEAD_CHARS))
    if limit is not None:
        rows = rows[:limit]
    return [(pk, doc, path_of(section_path, metadata), head) for pk, doc, section_path, metadata, head in rows]


def path_of(section_path, metadata) -> tuple[str, ...]:
    """A parent chunk's place: its section path, else its title alone (a page, a slide), else the top."""
    if isinstance(section_path, list) and section_path:
        return tuple(str(t) for t in section_path)
    title = (metadata or {}).get("title") if isinstance(metadata, dict) else None
    return (str(title),) if title else ()


def summary_of(head: str, path: tuple[str, ...]) -> str:
    """The first sentences of a parent chunk's text, its heading line left out (chunking puts the path first)."""
    heading = " › ".join(path)
    body = head[len(heading):] if heading and head.startswith(heading) else head
    body = " ".join(body.split())
    out = ""
    for sentence in _SENTENCE_END.split(body):
        if out and len(out) + len(sentence) + 1 > SUMMARY_CHARS:
            break
        out = f"{out} {sentence}".strip()
    return out[:SUMMARY_CHARS]


def sections(rows: list[tuple]) -> list[Section]:
    """Every node of every document in `rows` (from `parent_rows`), parents before their subsections.

    A section's text may come in several parent chunks (a long one is split), and a heading may own
    no text of its own (a chapter whose text sits under its subsections): both fold into one node."""
    nodes: dict[tuple, Section] = {}
    order: list[Section] = []
    for pk, document_id, path, head in rows:
        for depth in range(0 if path else -1, len(path)):
            prefix = path[: depth + 1] if depth >= 0 else ()
            key = (document_id, prefix)
            node = nodes.get(key)
            if node is None:
                node = nodes[key] = Section(document_id, prefix)
                order.append(node)
                if prefix:
                    parent = nodes.get((document_id, prefix[:-1]))
                    if parent is not None:
                        parent.children.append(node)
            node.parent_ids.append(pk)
            if not node.summary:
                node.summary = summary_of(head, path)
    return order


def document_tree(document) -> list[Section]:
    """The document's table of contents: its top-level sections, each with its subsections."""
    return [s for s in sections(parent_rows(document.chunks.all())) if len(s.path) <= 1]
