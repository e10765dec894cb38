"""A tree's scope, its leaves and nodes in the database, and the nodes planned from the leaves' vectors.

A tree summarises one scope: a document's episodes, or a user's chat episodes in one knowledge base
(those outside any agent, group or run: a tree of one scope never mixes another's memories). Its
nodes are memories of kind "summary" with the scope's owner fields (document, or user with no
session), so every delete that removes the scope's rows by document, KB, tenant or user removes them
too. A node cites its leaves: `metadata.leaves` (episode ids), their chunks (`source_chunks`, one
per section) or their messages (`source_message_ids`, with `metadata.messages` naming each one's
session), and `metadata.children` names the nodes or episodes it summarises.

Node ids are uuid5s of the scope, the leaves' hash, the level and the position, so building the same
tree twice writes the same rows, and a changed tree never reuses an id of the tree it replaces.
"""

import hashlib
from dataclasses import dataclass, field

import numpy as np

from memory.ids import memory_uuid
from memory.models import Document, Memory
from retrieval.summary_tree import cluster, summarise
from tenants.models import KnowledgeBase

MIN_LEAVES = 2  # a tree over one episode would repeat it


@dataclass(frozen=True)
class TreeScope:
    tenant_id: int
    kb_id: int
    document_id: int | None = None
    user_id: str = ""

    @classmethod
    def of_document(cls, document: Document) -> "TreeScope":
        return cls(document.kb.tenant_id, document.kb_id, document_id=document.pk)

    @classmethod
    def of_user(cls, kb: KnowledgeBase, user_id: str) -> "TreeScope":
        return cls(kb.tenant_id, kb.pk, user_id=user_id)

    @property
    def key(self) -> str:
        return f"doc:{self.document_id}" if self.document_id else f"user:{self.kb_id}:{self.user_id}"

    def leaves(self):
        """The scope's active episodes, in reading order (a document's sections, a user's time line)."""
        qs = Memory.objects.filter(tenant_id=self.tenant_id, kb_id=self.kb_id, kind=Memory.Kind.EPISODE,
                                   status=Memory.Status.ACTIVE)
        if self.document_id:
            return qs.filter(document_id=self.document_id).order_by("ordinal", "pk")
        return qs.filter(document__isnull=True, user_id=self.user_id, agent_id="", group_id="",
                         run_id="").order_by("occurred_at", "created_at", "pk")

    def nodes(self):
        qs = Memory.objects.filter(tenant_id=self.tenant_id, kb_id=self.kb_id, kind=Memory.Kind.SUMMARY)
        if self.document_id:
            return qs.filter(document_id=self.document_id)
        return qs.filter(document__isnull=True, user_id=self.user_id)


def scope_of(memory: Memory) -> TreeScope | None:
    """The tree an episode or a summary node belongs to (None for other memories and scoped chats)."""
    if memory.kind not in (Memory.Kind.EPISODE, Memory.Kind.SUMMARY):
        return None
    if memory.document_id:
        return TreeScope(memory.tenant_id, memory.kb_id, document_id=memory.document_id)
    if memory.user_id and not (memory.agent_id or memory.group_id or memory.run_id):
        return TreeScope(memory.tenant_id, memory.kb_id, user_id=memory.user_id)
    return None


def leaf_hash(leaves: list[Memory], identity: str) -> str:
    h = hashlib.sha256(identity.encode())
    for leaf in leaves:
        h.update(f"|{leaf.pk}:{leaf.content_hash}".encode())
    return h.hexdigest()[:32]


@dataclass
class Item:
    """One entry of a level: an episode (level 0) or a node built above."""
    id: str
    vector: np.ndarray
    member: summarise.Member
    leaves: list[str]
    occurred_at: object = None


@dataclass
class Planned:
    nodes: list[Memory] = field(default_factory=list)
    leaves: dict[str, list[str]] = field(default_factory=dict)  # node id -> its leaf episode ids


def plan(scope: TreeScope, leaves: list[Memory], vectors, identity: str) -> Planned:
    """The tree's nodes (unsaved) over `leaves` and their `vectors`, level by level up to one root."""
    out = Planned()
    if len(leaves) < MIN_LEAVES:
        return out
    tree = leaf_hash(leaves, identity)
    items = [Item(str(leaf.pk), np.asarray(v, dtype=np.float32), summarise.Member(leaf.topic, leaf.text, (leaf.topic,)),
                  [str(leaf.pk)], leaf.occurred_at) for leaf, v in zip(leaves, vectors)]
    level = 0
    while len(items) > 1:
        level += 1
        above = []
        for n, group in enumerate(cluster.clusters(np.stack([it.vector for it in items]))):
            members = [items[i] for i in group]
            if len(members) == 1:
                above.append(members[0])  # alone in its cluster: it joins the next level as it is
                continue
            written = summarise.summarise([m.member for m in members])
            node_leaves = [leaf for m in members for leaf in m.leaves]
            when = max((m.occurred_at for m in members if m.occurred_at), default=None)
            node = Memory(id=memory_uuid("summary-tree", scope.key, tree, level, n), tenant_id=scope.tenant_id,
                          kb_id=scope.kb_id, document_id=scope.document_id, user_id=scope.user_id,
                          kind=Memory.Kind.SUMMARY, ordinal=len(out.nodes), text=written.text, topic=written.topic,
                          occurred_at=when, extraction_mode="llm" if written.by == "llm" else "deterministic",
                          content_hash=Memory.hash_text(written.text),
                          metadata={"level": level, "children": [m.id for m in members], "leaves": node_leaves,
                                    "summarised_by": written.by})
            out.nodes.append(node)
            out.leaves[str(node.pk)] = node_leaves
            paths = tuple(dict.fromkeys(p for m in members for p in m.member.paths))
            above.append(Item(str(node.pk), cluster.centroid(np.stack([m.vector for m in members])),
                              # the level above names the parts itself (from `paths`): it reads the body
                              summarise.Member(written.topic, written.body or written.text, paths), node_leaves, when))
        items = above
    root = out.nodes[-1]
    root.metadata.update({"root": True, "tree": identity, "leaf_hash": tree})
    return out
