"""The summary tree (issue 39, RAPTOR-style): broad questions meet summaries, not fragments.

Each parent chunk of a document has one episode and each chat segment one episode; nothing sat above
them, so "what is this book about?" or "what did we talk about across these sessions?" found
fragments. A tree clusters a scope's episodes by their vectors (cluster.py), writes each cluster's
summary (summarise.py: the most central sentences, or the LLM's paragraph when one is configured),
and repeats over the summaries until one root. The nodes are memories of kind "summary" (build.py),
indexed like every memory inside the permission pre-filter, cited to their leaves, and kept current
by refresh.py (`check` is reconcile's view of them). Search reaches them when asked for (memory_types "summary") and, with
SUMMARY_TREE_IN_HYBRID, in hybrid's episode recall.
"""

from retrieval.summary_tree.build import TreeScope
from retrieval.summary_tree.refresh import (build_for_document, check, enabled, follow_changes, follow_deletes,
                                            identity, refresh, refresh_tenant, refresh_user)

__all__ = ["TreeScope", "build_for_document", "check", "enabled", "follow_changes", "follow_deletes", "identity",
           "refresh", "refresh_tenant", "refresh_user"]
