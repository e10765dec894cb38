"""Whether an installation indexed on Milvus Lite still awaits `manage.py reindex` into the embedded index.

Before the embedded vector index (retrieval/backends/sqlite_vectors.py) became the default, an
installation kept its vectors in Milvus Lite's `var/milvus.db`. After the upgrade its settings name
the new backend, whose file starts empty: vector search finds nothing and hybrid search runs on
keyword and entities alone until the gapless `reindex` writes a new build from the database.
`up`, `reconcile` and /healthz say so, with what to run.
"""

from pathlib import Path

from django.conf import settings

from common.backends import DEFAULT_ALIAS, vector_indexes
from memory.models import Chunk, Memory
from retrieval.backends import vector_index
from retrieval.backends.sqlite_vectors import SqliteVectorIndex


def notice() -> str | None:
    """One sentence when the embedded index serves, is empty, Milvus Lite holds data and the database has rows."""
    backend = vector_indexes.backend(DEFAULT_ALIAS)
    if not (isinstance(backend, type) and issubclass(backend, SqliteVectorIndex)):
        return None
    lite = Path(getattr(settings, "MILVUS_LITE_PATH", "") or "")
    if not lite.name or not lite.exists():
        return None
    if not vector_index().is_empty():
        return None
    if not (Memory.objects.exists() or Chunk.objects.exists()):
        return None
    return (f"The vector index is now embedded (no Milvus Lite server), but this installation's vectors are "
            f"still in Milvus Lite ({lite}): run `manage.py reindex` to move them (online; until it ends, vector "
            f"search finds nothing and hybrid search answers from keywords and entities).")
