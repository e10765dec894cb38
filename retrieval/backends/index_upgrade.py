"""Whether an installation still awaits the move of its rows into a new embedded default index.

Two defaults changed under installations that kept their rows elsewhere: vectors moved from Milvus
Lite's `var/milvus.db` to the embedded index (retrieval/backends/sqlite_vectors.py), keyword rows from
SQLite FTS5's `var/keyword.sqlite3` to tantivy's `var/keyword-index` (tantivy_keywords.py). After
the upgrade the settings name the new backend, whose index starts empty: that kind of search finds
nothing until the rows are written again from the database (the gapless `reindex`; for keywords
alone `reconcile --repair`, which embeds nothing, and which `up` runs by itself for an empty keyword
index). `up`, `reconcile` and /healthz say so, with what to run.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from django.conf import settings

from common.backends import DEFAULT_ALIAS, BackendHandler, keyword_indexes, vector_indexes
from memory.models import Chunk, Memory
from retrieval import builds
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.sqlite_fts import SqliteKeywordIndex
from retrieval.backends.sqlite_vectors import SqliteVectorIndex
from retrieval.backends.tantivy_keywords import TantivyKeywordIndex


@dataclass(frozen=True)
class Move:
    kind: str  # "vector" or "keyword"
    handler: BackendHandler
    new: type  # the embedded default the rows move into
    index: Callable  # the live build's index of that kind
    old_file: Callable[[], Path | None]  # where the previous default kept them
    says: str  # with {old}: the sentence


def _milvus_lite() -> Path | None:
    return Path(getattr(settings, "MILVUS_LITE_PATH", "") or "") or None


def _fts5() -> Path | None:
    """The FTS5 file of the live build (`keyword.sqlite3`, or `keyword.bN.sqlite3` after a reindex)."""
    options = keyword_indexes.options(DEFAULT_ALIAS)
    if not options.get("path"):
        return None
    live = builds.current().live.number
    return Path((SqliteKeywordIndex.build_options(options, live) if live else options)["path"])


MOVES = (
    Move("vector", vector_indexes, SqliteVectorIndex, vector_index, _milvus_lite,
         "The vector index is now embedded (no Milvus Lite server), but this installation's vectors are still in "
         "Milvus Lite ({old}): run `manage.py reindex` to move them (online; until it ends, vector search finds "
         "nothing and hybrid search answers from keywords and entities)."),
    Move("keyword", keyword_indexes, TantivyKeywordIndex, keyword_index, _fts5,
         "The keyword index is now tantivy, but this installation's keyword rows are still in SQLite FTS5 ({old}): "
         "run `manage.py reconcile --repair` to write them (nothing is embedded again; `manage.py up` does it by "
         "itself before it serves; `reindex` also does); until then keyword search finds nothing and hybrid "
         "search answers from vectors and entities."),
)


def notice(kind: str = "vector") -> str | None:
    """One sentence when the new default serves `kind`, is empty, the old file is there and the database has rows."""
    move = next(m for m in MOVES if m.kind == kind)
    backend = move.handler.backend(DEFAULT_ALIAS)
    if not (isinstance(backend, type) and issubclass(backend, move.new)):
        return None
    old = move.old_file()
    if old is None or not old.name or not old.exists():
        return None
    if not move.index().is_empty():
        return None
    if not (Memory.objects.exists() or Chunk.objects.exists()):
        return None
    return move.says.format(old=old)


def notices() -> dict[str, str]:
    """{kind: sentence} for every kind of index that awaits its move."""
    return {move.kind: said for move in MOVES if (said := notice(move.kind))}
