"""The database → index projection, one module per job:

    rows.py         the rows the indexes should hold, built from chunks and memories
    writes.py       embedding and writing rows into every build that must have them, checked afterwards
    removal.py      removing rows (of memories, chunks, a document, KBs, a scope) from both places
    rebuild.py      reindex: one tenant or KB in place, or everything into a new build
    tenant_move.py  a tenant's rows after an isolation switch
    reconcile.py    the database against the indexes: missing and stale rows, repaired on request

Every write and delete lands in each build that must have it (retrieval/builds.py): the live one
and, while an online reindex runs, the one it is building. Callers import the API below from here.
"""

from retrieval.projection.rebuild import rebuild, refill_empty_keyword_index, reindex
from retrieval.projection.reconcile import reconcile, reconcile_removed
from retrieval.projection.removal import (remove_chunk_rows, remove_document_rows, remove_kb_rows, remove_memory_rows,
                                          remove_scope_rows)
from retrieval.projection.rows import chunk_key, document_rows, expected_rows, memory_key, row_for_chunk, row_for_memory
from retrieval.projection.tenant_move import move_tenant_rows
from retrieval.projection.writes import index_document_rows, index_memories, still_wanted, write_rows

__all__ = ["chunk_key", "document_rows", "expected_rows", "index_document_rows", "index_memories", "memory_key",
           "move_tenant_rows", "rebuild", "reconcile", "reconcile_removed", "refill_empty_keyword_index", "reindex",
           "remove_chunk_rows", "remove_document_rows", "remove_kb_rows", "remove_memory_rows", "remove_scope_rows",
           "row_for_chunk", "row_for_memory", "still_wanted", "write_rows"]
