"""What the core's actions tell the indexes: sent inside the action's transaction, acted on after it commits.

The core sits below `retrieval` and may not import it, yet every change to a memory and every delete
must reach the vector and keyword indexes. So each action sends one of these signals from inside its
own transaction, and `retrieval` (retrieval/signals.py, connected in `RetrievalConfig.ready`)
schedules the index write or removal with `transaction.on_commit`: a rolled-back action changes no
index, a committed one always does. Receivers get ids, never instances that may be gone, so a
removal can run after the rows it is named after were deleted, and running it twice is harmless.
"""

from django.dispatch import Signal

# memories=[Memory]: their status or text changed; the indexes keep the active ones and drop the rest.
memories_changed = Signal()
# tenant_id, kb_ids, memory_ids: these memories were deleted.
memories_deleted = Signal()
# tenant_id, kb_ids, user_id, session_id (None: every session): a user's (or a session's) memories were deleted.
user_memories_deleted = Signal()
# tenant_id, kb_id, chunk_ids: these chunks were deleted.
chunks_deleted = Signal()
# tenant_id, kb_id, document_id: the document, its chunks and its memories were deleted.
document_deleted = Signal()
# tenant_id, kb_id, document_id: the document was stopped before it was ready (cancelled): its rows stay
# in the database for a re-run, but none of it may stay in the indexes.
document_withdrawn = Signal()
# tenant_id, knowledge_bases=[(kb_id, slug)], again=[kb_id] or None (every KB of the tenant): these
# knowledge bases are being deleted, with everything in them. `again` names KBs whose rows are
# removed again if an earlier delete already removed them from the database.
knowledge_bases_deleted = Signal()
