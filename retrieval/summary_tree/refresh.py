"""Keeping trees current: built when their scope's episodes change, rebuilt when their identity does,
removed when the setting is off. Every path compares the leaves' hash recorded on the root with the
leaves now (`leaf_hash`): an unchanged scope writes nothing.

Who calls what:
- a document's index stage: `build_for_document` (its rows then go with the document's own);
- a chat flush: `refresh_user`;
- a change to an episode (disabled, edited, deleted; a session deleted): `follow_changes` /
  `follow_deletes`, after the commit, from retrieval/signals.py;
- `manage.py reindex`: `refresh_tenant`, before its rows are projected.
"""

import logging
from contextlib import nullcontext
from typing import Callable, ContextManager, Iterable

from django.conf import settings
from django.db import transaction

from memory.models import Document, Memory
from retrieval.embeddings import embedder
# The projection's modules, not its package: the package's rebuild imports this module.
from retrieval.projection.removal import remove_memory_rows
from retrieval.projection.rows import row_for_memory
from retrieval.projection.writes import index_memories, row_vectors
from retrieval.summary_tree import cluster, summarise
from retrieval.summary_tree.build import TreeScope, leaf_hash, plan, scope_of
from tenants.models import KnowledgeBase, Tenant

log = logging.getLogger(__name__)

USER_TREE_GROWTH = 1.25  # a user's tree waits for a quarter more episodes: O(log n) rebuilds, not one a flush


def enabled() -> bool:
    return bool(settings.SUMMARY_TREE)


def identity() -> str:
    """What a tree was built by: summariser, embedder (its vectors cluster the leaves), branching."""
    return f"{summarise.identity()}|{embedder().name}|b{cluster.BRANCH}"


def refresh(scope: TreeScope, *, index: bool = True, guard: Callable[[], ContextManager] = nullcontext) -> list[Memory]:
    """Rebuild the scope's tree when its leaves or identity changed (remove it when off); returns the new nodes.

    `index`: write the new nodes' rows and remove the old ones' now (False: the caller projects them).
    `guard`: the document index stage's claim, so a stage that lost its document writes no tree."""
    old, leaves, ident, wanted = _state(scope)
    if _current(old, wanted):
        return []
    planned = plan(scope, leaves, row_vectors([row_for_memory(m) for m in leaves]), ident) if wanted else None
    with guard(), transaction.atomic():
        Memory.objects.filter(pk__in=[pk for pk, _ in old]).delete()
        nodes = _write(planned, leaves) if planned else []
    if index:
        if old:
            remove_memory_rows(scope.tenant_id, {scope.kb_id}, [pk for pk, _ in old])
        if nodes:
            index_memories(nodes)
    return nodes


def _state(scope: TreeScope):
    """The scope's nodes (pk, metadata), its leaves, the identity and the leaves' hash a current tree has
    ("" when the scope should have no tree: the setting is off, or fewer than two episodes)."""
    old = list(scope.nodes().values_list("pk", "metadata"))
    leaves = list(scope.leaves()) if enabled() else []
    ident = identity() if leaves else ""
    return old, leaves, ident, leaf_hash(leaves, ident) if len(leaves) >= 2 else ""


def _current(old, wanted: str) -> bool:
    if wanted:
        return any(m.get("root") and m.get("leaf_hash") == wanted for _, m in old)
    return not old


def _write(planned, leaves: list[Memory]) -> list[Memory]:
    Memory.objects.bulk_create(planned.nodes)
    by_id = {str(leaf.pk): leaf for leaf in leaves}
    chunks: dict[str, list[int]] = {}
    through = Memory.source_chunks.through
    # One chunk per section: the parent chunk each document episode was written from.
    for memory_id, chunk_id, level in through.objects.filter(memory_id__in=list(by_id)).values_list(
            "memory_id", "chunk_id", "chunk__level"):
        if level == "parent":
            chunks.setdefault(str(memory_id), []).append(chunk_id)
    rows = []
    for node in planned.nodes:
        node_leaves = planned.leaves[str(node.pk)]
        rows += [through(memory_id=node.pk, chunk_id=c) for c in dict.fromkeys(
            c for leaf in node_leaves for c in chunks.get(leaf, ()))]
        messages = [(by_id[leaf].session_id, mid) for leaf in node_leaves for mid in by_id[leaf].source_message_ids]
        if messages:
            node.source_message_ids = list(dict.fromkeys(mid for _, mid in messages))
            node.metadata["messages"] = messages
            node.save(update_fields=["source_message_ids", "metadata"])
    through.objects.bulk_create(rows, batch_size=500)
    return planned.nodes


def build_for_document(document: Document, guard: Callable[[], ContextManager] = nullcontext) -> int:
    """The document's tree, before its index stage writes its rows (the nodes are among them)."""
    return len(refresh(TreeScope.of_document(document), index=False, guard=guard))


def refresh_user(kb: KnowledgeBase, user_id: str) -> int:
    """After a flush: the user's tree, rebuilt once their episodes grew by USER_TREE_GROWTH since it was
    built (a tree that cites a deleted or changed episode is rebuilt at once, by follow_*). Rebuilding
    at every flush cost 38 % of LoCoMo's ingestion CPU (bench/RESULTS.md, "Summary tree"); a summary
    is the broad view, and the newest sessions are found by their own episodes meanwhile."""
    scope = TreeScope.of_user(kb, user_id)
    if enabled():
        top = scope.nodes().filter(metadata__root=True).values_list("metadata", flat=True).first()
        if top and top.get("tree") == identity() and scope.leaves().count() < USER_TREE_GROWTH * len(top["leaves"]):
            return 0
    return len(refresh(scope))


def refresh_tenant(tenant: Tenant, kb: KnowledgeBase | None = None, *, index: bool = False) -> int:
    """Every tree of a tenant (or one KB) made current: built, rebuilt or removed. Returns nodes written."""
    return sum(len(refresh(scope, index=index)) for scope in scopes(tenant, kb))


def check(tenant: Tenant, *, repair: bool = False) -> dict:
    """`reconcile`'s view of the trees: how many scopes' trees are not what their episodes make now
    (missing, built over other leaves or by another summariser or embedder, or left while the
    setting is off; a user's tree waiting for growth counts), rebuilt with `repair`."""
    behind = []
    for scope in scopes(tenant):
        old, _, _, wanted = _state(scope)
        if not _current(old, wanted):
            behind.append(scope.key)
            if repair:
                refresh(scope)
    return {"out_of_date": len(behind), "sample": behind[:5], "repaired": bool(repair and behind)}


def scopes(tenant: Tenant, kb: KnowledgeBase | None = None) -> list[TreeScope]:
    """Every scope of a tenant (or one KB) that has episodes or nodes: its ready documents and chat users."""
    out = []
    for one in [kb] if kb else list(tenant.knowledge_bases.all()):
        memories = Memory.objects.filter(kb=one, kind__in=(Memory.Kind.EPISODE, Memory.Kind.SUMMARY))
        documents = set(memories.filter(document__status=Document.Status.READY).values_list("document_id", flat=True))
        users = set(memories.filter(document__isnull=True, agent_id="", group_id="", run_id="")
                    .values_list("user_id", flat=True))
        out += [TreeScope(tenant.pk, one.pk, document_id=d) for d in sorted(documents)]
        out += [TreeScope(tenant.pk, one.pk, user_id=u) for u in sorted(users) if u]
    return out


def follow_changes(memories: Iterable[Memory]) -> None:
    """Episodes disabled, edited or restored: their trees rebuilt (a summary's own change is left as made)."""
    scopes = {scope_of(m) for m in memories if m.kind == Memory.Kind.EPISODE}
    for scope in sorted(filter(None, scopes), key=lambda s: s.key):
        refresh(scope)


def follow_deletes(tenant_id: int, kb_ids, memory_ids=(), *, user_id: str | None = None,
                   session_id: str | None = None) -> None:
    """Memories deleted (or a user's session): the trees that cited them rebuilt without them."""
    gone = {str(i) for i in memory_ids}
    scopes = set()
    if user_id is not None and session_id is not None:
        scopes |= {TreeScope(tenant_id, kb, user_id=user_id) for kb in kb_ids}
    if gone:
        roots = Memory.objects.filter(tenant_id=tenant_id, kb_id__in=list(kb_ids), kind=Memory.Kind.SUMMARY,
                                      metadata__root=True)
        scopes |= {scope_of(root) for root in roots if gone.intersection(root.metadata.get("leaves", ()))}
    for scope in sorted(filter(None, scopes), key=lambda s: s.key):
        if Tenant.objects.filter(pk=scope.tenant_id).exists():
            refresh(scope)
