"""Vector index on Milvus through pymilvus' MilvusClient: a Milvus cluster, or the local Milvus Lite server.

Collections are named by dimension (`{prefix}_{dim}`, exclusive tenants `{prefix}_t{tenant}_{dim}`)
so rows of a new embedding model never land in the old model's collection. Filters become a Milvus
boolean expression of escaped literals (milvus_expr.py).
"""

import logging
import os
import re
import threading
from ipaddress import ip_address
from typing import Iterator
from urllib.parse import urlsplit

import grpc
import numpy as np

from django.core.exceptions import ImproperlyConfigured
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import MilvusException

from retrieval.backends import check_top_k, clean_filter, clean_rows
from retrieval.backends.base import Hit, IndexFilter, IndexRow
from retrieval.backends.milvus_expr import build_expr, number_literal, string_literal
from retrieval.milvus_lite import ensure_server, release

log = logging.getLogger(__name__)
# The expression builders lived here first; they are still importable from this module.
__all__ = ["MilvusLiteServer", "MilvusVectorIndex", "build_expr", "collection_name", "number_literal", "string_literal"]

ID_BYTES = 512
# VARCHAR max_length counts UTF-8 bytes.
STRING_FIELDS = {"kind": 64, "parent_id": 512, "status": 64, "user_id": 512, "session_id": 512,
                 "agent_id": 512, "group_id": 512, "run_id": 512}
INT_FIELDS = ("tenant_id", "kb_id", "document_id")
SCALAR_INDEXED = ("tenant_id", "kb_id", "document_id", "parent_id")  # the fields every filter or delete uses
HIT_FIELDS = ["kind", "kb_id", "document_id", "parent_id"]
INDEX_TYPES = {  # build params, search params, search params that visit every row (None: there are none)
    # nlist ~ 4*sqrt(rows) for ~1M rows (Milvus' guidance), nprobe 16 of 128 lists; probing all 128
    # scores every row the filter lets through, i.e. exactly. Milvus Lite 2.5.1 holds a collection in
    # one growing segment whose IVF index is built only after 100,000 inserted rows (build ratio 0.1
    # of its compiled-in 1M max index rows); below that it scores every filtered row whatever
    # nprobe says (14 ms at 99,990 rows, 0.9 ms at 100,000); flush and release/load change nothing
    # and compact is unimplemented. Above it, id-filtered searches still return every picked row.
    "IVF_FLAT": ({"nlist": 128}, {"nprobe": 16}, {"nprobe": 128}),
    "FLAT": ({}, {}, {}),
    # Milvus' documented defaults; servers only. No ef makes a graph search exhaustive.
    "HNSW": ({"M": 16, "efConstruction": 200}, {"ef": 64}, None),
}
UPSERT_BATCH = 500
EXACT_LIMIT = 16384  # Milvus' largest query window; selective filters stay far below it
_PREFIX_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_INHERITED: list = []  # clients created before a fork; destroying their gRPC channel in the child is unsafe


def collection_name(prefix: str, dim: int, tenant_id: int | None = None) -> str:
    """`{prefix}_{dim}`, or `{prefix}_t{tenant}_{dim}` for an exclusive tenant."""
    return f"{prefix}_{int(dim)}" if tenant_id is None else f"{prefix}_t{int(tenant_id)}_{int(dim)}"


def _vector(vector) -> list[float]:
    if isinstance(vector, (str, bytes)) or not hasattr(vector, "__len__") or not len(vector):
        raise ValueError("vector must be a non-empty sequence of floats")
    return [float(x) for x in vector]


def _hit(row) -> Hit:
    entity = row["entity"]  # looked up once: pymilvus' result rows answer [] through a Python method
    return Hit(id=row["id"], score=float(row["distance"]), extra={f: entity.get(f) for f in HIT_FIELDS})


def _deleted(result) -> int:
    # Milvus Lite answers a filtered delete with the deleted primary keys, servers with a count.
    return len(result) if isinstance(result, list) else int(result.get("delete_count", 0))


# The embedded Milvus Lite server keeps gRPC's default ping policy (a ping at most every 5 minutes
# while no call is active); pymilvus pings every 10 s, so after ~2.5 idle minutes the server answered
# GOAWAY too_many_pings and every process printed it as an error. A local socket needs no keepalive.
# The same for any server on this machine named by its URI (a Lite server another process started,
# a local standalone): a loopback connection has no middlebox to keep it open for.
LITE_GRPC_OPTIONS = {"grpc.keepalive_time_ms": 600_000, "grpc.keepalive_permit_without_calls": False}


def on_this_machine(uri: str) -> bool:
    """Whether `uri` names a loopback address (localhost, 127.0.0.0/8, ::1)."""
    host = urlsplit(uri if "://" in uri else f"//{uri}").hostname or ""
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


# Milvus's own codes for "not now": 2 = cannot connect (pymilvus, server down or restarting),
# 8 = rate limited. Other codes (bad expression, schema mismatch) are permanent.
TRANSIENT_CODES = {2, 8}
TRANSIENT_WORDS = ("server unavailable", "unavailable", "deadline exceeded", "connection refused")


class MilvusLiteServer:
    """The Milvus Lite server over one data file, as `up` starts it and lets go of it (retrieval/milvus_lite/)."""

    def __init__(self, path: str, port: int = 0):
        self.path, self.port = path, port

    def start(self) -> str:
        # Before `up`'s children, which then find it (and register as its users) instead of racing to start it.
        return f"Milvus Lite: {ensure_server(self.path, self.port or None)} ({self.path})"

    def stop(self) -> str:
        # It stops now unless another process (a `manage.py ingest` beside `up`) still uses it.
        return "" if release(self.path) else "Milvus Lite: stops when the last process still using it exits"


class MilvusVectorIndex:
    """VectorIndex on Milvus or Milvus Lite: cosine similarity, filters inside the search."""

    # One per process: a MilvusClient's gRPC channel serves concurrent calls, the client is made
    # under a lock, and the set of known collections only grows (or is reset) atomically.
    thread_safe = True

    @staticmethod
    def build_options(options: dict, build: int) -> dict:
        """The OPTIONS of projection build `build`: collections of its own, `{prefix}_b{build}_{dim}`
        (which the prefix's own patterns, `{prefix}_{dim}` and `{prefix}_t{id}_{dim}`, never match)."""
        return {**options, "collection_prefix": f"{options.get('collection_prefix') or 'loci'}_b{int(build)}"}

    @staticmethod
    def transient(exc: BaseException) -> bool:
        """Milvus' "not now": the server down or restarting, a deadline, rate limiting. A bad
        expression or a schema mismatch is permanent."""
        if not isinstance(exc, (MilvusException, grpc.RpcError)):
            return False
        if type(exc).__name__ == "MilvusUnavailableException":
            return True
        code = getattr(exc, "code", None)
        if callable(code):  # grpc.RpcError: code() is a StatusCode
            return getattr(code(), "name", "") in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED")
        message = str(getattr(exc, "message", "") or exc).lower()
        return code in TRANSIENT_CODES or any(word in message for word in TRANSIENT_WORDS)

    @staticmethod
    def describe(options: dict) -> str:
        if options.get("uri"):
            return f"Milvus at {options['uri']}"
        if options.get("lite_port"):
            return f"Milvus Lite at 127.0.0.1:{options['lite_port']}"
        return f"Milvus Lite over {options.get('lite_path')}"  # its port is picked at start

    @staticmethod
    def local_server(options: dict) -> "MilvusLiteServer | None":
        """Milvus Lite (no `uri`): one server per data file, which every build of the alias shares."""
        if options.get("uri") or not options.get("lite_path"):
            return None
        return MilvusLiteServer(options["lite_path"], int(options.get("lite_port") or 0))

    def __init__(self, options: dict):
        self.uri = options.get("uri") or ""
        self.token = options.get("token") or ""
        self.lite_path = options.get("lite_path") or ""
        self.lite_port = int(options.get("lite_port") or 0)  # 0: the port its server has, or a free one
        self.prefix = options.get("collection_prefix") or "loci"
        self.index_type = (options.get("index_type") or "IVF_FLAT").upper()
        self.consistency = options.get("consistency_level") or "Strong"  # a just-indexed row is searchable
        self.timeout = float(options.get("timeout") or 30)
        # Partition key on tenant_id suits a Milvus server with many tenants; Milvus Lite 2.5.1
        # accepts the schema but then rejects every filtered search on it, so it is opt-in.
        self.partition_key = bool(options.get("partition_key", False))
        if not _PREFIX_RE.match(self.prefix):
            raise ImproperlyConfigured(f"collection_prefix {self.prefix!r} must match {_PREFIX_RE.pattern}")
        if self.index_type not in INDEX_TYPES:
            raise ImproperlyConfigured(f"index_type must be one of {sorted(INDEX_TYPES)}")
        if not self.uri and self.index_type == "HNSW":
            raise ImproperlyConfigured("Milvus Lite supports FLAT and IVF_FLAT only; HNSW needs a Milvus server "
                                       "(MILVUS_URI).")
        if not self.uri and not self.lite_path:
            raise ImproperlyConfigured("MilvusVectorIndex needs OPTIONS['uri'] or OPTIONS['lite_path'].")
        self._client_obj: MilvusClient | None = None
        self._pid = 0
        self._known: set[str] = set()  # collections this process has seen created and loaded
        self._lock = threading.Lock()

    # --- connection
    def _client(self) -> MilvusClient:
        if self._client_obj is None or self._pid != os.getpid():
            with self._lock:
                if self._client_obj is None or self._pid != os.getpid():
                    if self._client_obj is not None:  # inherited across fork: keep it alive, unused
                        _INHERITED.append(self._client_obj)
                    uri = self.uri
                    if not uri:
                        # Verifies that the server serves this lite_path before any call reaches it.
                        uri = ensure_server(self.lite_path, self.lite_port or None)
                    # dedicated: pymilvus shares channels per address, and a gRPC channel inherited
                    # across a fork (Celery prefork) does not work in the child.
                    self._client_obj = MilvusClient(uri=uri, token=self.token, timeout=self.timeout, dedicated=True,
                                                    **({} if self.uri and not on_this_machine(self.uri)
                                                       else {"grpc_options": LITE_GRPC_OPTIONS}))
                    self._pid, self._known = os.getpid(), set()
        return self._client_obj

    def close(self) -> None:
        with self._lock:
            client, self._client_obj = self._client_obj, None
            self._known = set()
        if client is not None and self._pid == os.getpid():
            client.close()

    def ping(self) -> None:
        """One cheap round trip to the server (the health check)."""
        self._client().list_collections()

    # --- collections
    def _create(self, name: str, dim: int, shared: bool) -> None:
        client = self._client()
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=ID_BYTES)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        for field in INT_FIELDS:
            partition_key = field == "tenant_id" and shared and self.partition_key
            schema.add_field(field, DataType.INT64, is_partition_key=partition_key)
        for field, length in STRING_FIELDS.items():
            schema.add_field(field, DataType.VARCHAR, max_length=length)
        schema.add_field("meta", DataType.JSON)
        try:
            client.create_collection(name, schema=schema, consistency_level=self.consistency)
        except MilvusException:
            if not client.has_collection(name):  # else a concurrent process created it first
                raise

    def _create_indexes(self, name: str) -> None:
        client = self._client()
        # Milvus < 2.4 has no INVERTED index and refuses it ("index type not match"); there the
        # server's default scalar index for the field type (STL_SORT, Trie) is built instead.
        for scalar_type in ("INVERTED", ""):
            built = set(client.list_indexes(name))
            index = client.prepare_index_params()
            if "vector" not in built:
                index.add_index(field_name="vector", index_type=self.index_type, metric_type="COSINE",
                                params=INDEX_TYPES[self.index_type][0])
            for field in SCALAR_INDEXED:
                if field not in built:
                    index.add_index(field_name=field, index_type=scalar_type)
            try:
                # sync=False: pymilvus otherwise polls every 0.5 s per index; an empty collection's
                # index is ready at once, and load_collection waits for what it needs.
                client.create_index(name, index, sync=False)
                return
            except MilvusException as exc:
                if not scalar_type or "index type not match" not in str(exc):
                    raise

    def _ready(self, name: str, *, dim: int = 0, shared: bool = True) -> bool:
        """Make sure `name` exists (creating it when `dim` is given), is indexed and loaded; False if absent."""
        if name in self._known:
            return True
        client = self._client()
        if not client.has_collection(name):
            if not dim:
                return False
            self._create(name, dim, shared)
        else:
            self._check_schema(name)
        # Checked for every collection first seen, not only ones created here: the creator may have
        # died (or still be running) between creating the collection and its indexes.
        if not client.list_indexes(name):
            self._create_indexes(name)
        client.load_collection(name)  # a no-op when loaded; after a server restart it is released
        self._known.add(name)
        return True

    def _check_schema(self, name: str) -> None:
        """A collection made before rows had scopes and metadata cannot hold them (Milvus adds no field
        to an existing collection): say what to do rather than fail on each write with a schema error."""
        fields = {f["name"] for f in self._client().describe_collection(name).get("fields", [])}
        if "meta" not in fields or "run_id" not in fields:
            raise MilvusException(message=f"Milvus collection {name} predates agent/group/run scopes and metadata; "
                                          "run `manage.py reindex` to rebuild the vector index into a new build.")

    def _scope_collections(self, flt: IndexFilter) -> list[str]:
        """Every collection (any dimension) holding rows of the filter's table set."""
        middle = rf"t{int(flt.tenant_id)}_" if flt.exclusive else ""
        pattern = re.compile(rf"^{re.escape(self.prefix)}_{middle}\d+$")
        return [name for name in self._client().list_collections() if pattern.match(name) and self._ready(name)]

    def _forget_if_dropped(self, name: str) -> bool:
        """After an error: True if the collection is gone (dropped by another process)."""
        self._known.discard(name)
        return not self._client().has_collection(name)

    # --- VectorIndex
    def upsert(self, rows: list[IndexRow], *, exclusive: bool = False) -> None:
        groups: dict[tuple[str, int], list[dict]] = {}
        for row in clean_rows(rows, need_vector=True):
            vector = _vector(row.vector)
            if len(row.id.encode()) > ID_BYTES:
                raise ValueError(f"IndexRow.id is longer than {ID_BYTES} bytes")
            for field, length in STRING_FIELDS.items():
                if len(getattr(row, field).encode()) > length:
                    raise ValueError(f"IndexRow.{field} of {row.id!r} is longer than {length} bytes")
            name = collection_name(self.prefix, len(vector), row.tenant_id if exclusive else None)
            groups.setdefault((name, len(vector)), []).append({
                "id": row.id, "vector": vector, "tenant_id": row.tenant_id, "kb_id": row.kb_id,
                "document_id": row.document_id, **{field: getattr(row, field) for field in STRING_FIELDS},
                "meta": row.metadata,
            })
        for (name, dim), data in groups.items():
            for start in range(0, len(data), UPSERT_BATCH):
                batch = data[start:start + UPSERT_BATCH]
                self._ready(name, dim=dim, shared=not exclusive)
                try:
                    self._client().upsert(name, batch)
                except MilvusException:
                    if not self._forget_if_dropped(name):
                        raise
                    self._ready(name, dim=dim, shared=not exclusive)  # dropped meanwhile: recreate, once
                    self._client().upsert(name, batch)

    def search(self, vector: list[float], flt: IndexFilter, top_k: int, min_score: float | None = None) -> list[Hit]:
        flt, limit, vector = clean_filter(flt), check_top_k(top_k), _vector(vector)
        expr = build_expr(flt)
        name = collection_name(self.prefix, len(vector), flt.tenant_id if flt.exclusive else None)
        if expr is None or not self._ready(name):
            return []
        _, params, exhaustive = INDEX_TYPES[self.index_type]
        if flt.ids or flt.parent_ids or flt.or_ids:
            # Rows picked by id or parent (cosine for BM25-only hits, mRAG's fact expansion) must all
            # be scored: an approximate search might not visit them. A search that visits every row
            # does it on the server; fetching the rows' vectors to score them here is 2-6x slower on
            # Milvus Lite (8 vs 17 ms for 20 ids, 15 vs 50-100 ms for 60 episodes' facts, at 100k rows).
            if exhaustive is None:
                return self._exact_search(name, expr, vector, limit, min_score)
            params = exhaustive
        try:
            # The level is passed per search too: a collection keeps the one it was created with.
            found = self._client().search(name, data=[vector], limit=limit, filter=expr, output_fields=HIT_FIELDS,
                                          search_params={"metric_type": "COSINE", "params": params},
                                          consistency_level=self.consistency)
        except MilvusException:
            if self._forget_if_dropped(name):
                return []
            raise
        hits = [_hit(row) for row in found[0]]
        # COSINE distance in Milvus is the similarity itself (higher is closer), already sorted.
        return hits if min_score is None else [h for h in hits if h.score >= min_score]

    def search_many(self, vectors: list[list[float]], flt: IndexFilter, top_k: int,
                    min_score: float | None = None) -> list[list[Hit]]:
        """One search request for many vectors under one filter (`search`'s answer for each, in order).

        Ingestion's duplicate check searches every new fact of a MemCell; one request each was a
        fifth of a LongMemEval-S user's ingestion time on Milvus Lite (bench/RESULTS.md)."""
        flt, limit = clean_filter(flt), check_top_k(top_k)
        vectors = [_vector(v) for v in vectors]
        if not vectors:
            return []
        if flt.ids or flt.parent_ids or flt.or_ids:  # scored exhaustively, one by one, as `search` does
            return [self.search(v, flt, top_k, min_score) for v in vectors]
        expr = build_expr(flt)
        name = collection_name(self.prefix, len(vectors[0]), flt.tenant_id if flt.exclusive else None)
        if expr is None or not self._ready(name):
            return [[] for _ in vectors]
        _, params, _ = INDEX_TYPES[self.index_type]
        try:
            found = self._client().search(name, data=vectors, limit=limit, filter=expr, output_fields=HIT_FIELDS,
                                          search_params={"metric_type": "COSINE", "params": params},
                                          consistency_level=self.consistency)
        except MilvusException:
            if self._forget_if_dropped(name):
                return [[] for _ in vectors]
            raise
        out = [[_hit(row) for row in rows] for rows in found]
        return out if min_score is None else [[h for h in hits if h.score >= min_score] for hits in out]

    def _exact_search(self, name, expr, vector, limit, min_score) -> list[Hit]:
        """Score a selective filter's rows here, from their vectors, where no search visits every row (HNSW)."""
        try:
            rows = self._client().query(name, filter=expr, output_fields=[*HIT_FIELDS, "vector"], limit=EXACT_LIMIT,
                                       consistency_level=self.consistency)
        except MilvusException:
            if self._forget_if_dropped(name):
                return []
            raise
        if not rows:
            return []
        matrix = np.asarray([r["vector"] for r in rows], dtype=np.float32)
        query = np.asarray(vector, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
        scores = matrix @ query / np.where(norms == 0, 1.0, norms)
        order = np.argsort(-scores, kind="stable")[:limit]
        hits = [Hit(id=rows[i]["id"], score=float(scores[i]), extra={f: rows[i].get(f) for f in HIT_FIELDS})
                for i in order]
        return hits if min_score is None else [h for h in hits if h.score >= min_score]

    def count(self, flt: IndexFilter) -> int:
        flt = clean_filter(flt)
        expr = build_expr(flt)
        if expr is None:
            return 0
        return sum(self._client().query(name, filter=expr, output_fields=["count(*)"])[0]["count(*)"]
                   for name in self._scope_collections(flt))

    def ids(self, flt: IndexFilter) -> Iterator[str]:
        flt = clean_filter(flt)
        expr = build_expr(flt)
        return iter(()) if expr is None else self._ids(flt, expr)

    def _ids(self, flt: IndexFilter, expr: str) -> Iterator[str]:
        for name in self._scope_collections(flt):
            pages = self._client().query_iterator(name, batch_size=1000, filter=expr, output_fields=["id"])
            try:
                while page := pages.next():
                    yield from (r["id"] for r in page)
            finally:
                pages.close()

    def delete(self, flt: IndexFilter) -> int:
        flt = clean_filter(flt)
        expr = build_expr(flt)
        if expr is None:
            return 0
        # Every dimension: deleting a document must also clear rows left by a previous model.
        return sum(_deleted(self._client().delete(name, filter=expr)) for name in self._scope_collections(flt))

    def drop_all(self) -> None:
        pattern = re.compile(rf"^{re.escape(self.prefix)}_(?:t\d+_)?\d+$")
        client = self._client()
        for name in client.list_collections():
            if pattern.match(name):
                client.drop_collection(name)
        self._known = set()
