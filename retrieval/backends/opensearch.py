"""BM25 keyword index on an OpenSearch cluster: the scale-out keyword backend.

Text is segmented by retrieval.text before it is sent, so the index analyses it with a plain
whitespace tokenizer and BM25 sees exactly the terms the SQLite backend sees. Filters are
`term`/`terms` clauses in the bool query's filter context: structured JSON values, never a query
string, so a hostile value is only ever a value. The request bodies are pure functions below.
"""

import os
import re
import threading
from typing import Iterator

from django.core.exceptions import ImproperlyConfigured

from retrieval.backends import check_query, check_top_k, clean_filter, clean_rows, matches_nothing
from retrieval.backends.base import SCOPE_FIELDS, Hit, IndexFilter, IndexRow
from retrieval.text import ANALYZER_GENERATION, index_terms, segment

HIT_FIELDS = ["kind", "kb_id", "document_id", "parent_id"]
MAX_RESULT_WINDOW = 10000  # OpenSearch's index.max_result_window default: size beyond it is refused
MAX_QUERY_TERMS = 64  # same cap as the SQLite backend
PAGE = 1000
_PREFIX_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")  # index names must be lowercase
TRANSIENT_STATUSES = {408, 429, 500, 502, 503, 504}


def index_mapping(*, shards: int = 1, replicas: int = 1) -> dict:
    """Settings and mappings of a row index (the body of the create-index request)."""
    return {
        "settings": {
            # One shard by default: BM25's IDF is per shard, and a small index split in several
            # shards ranks the same text differently depending on where it landed.
            "index": {"number_of_shards": shards, "number_of_replicas": replicas},
            "analysis": {"analyzer": {"loci_whitespace": {"type": "custom", "tokenizer": "whitespace"}}},
            # Lucene's BM25 defaults (Robertson et al.; k1=1.2, b=0.75), spelled out so they are pinned.
            "similarity": {"loci_bm25": {"type": "BM25", "k1": 1.2, "b": 0.75}},
        },
        "mappings": {
            "dynamic": "strict",  # a misspelt field fails the write instead of growing the mapping
            "properties": {
                "id": {"type": "keyword"},
                "text_seg": {"type": "text", "analyzer": "loci_whitespace", "similarity": "loci_bm25"},
                "tenant_id": {"type": "keyword"},
                "kb_id": {"type": "keyword"},
                "document_id": {"type": "keyword"},
                "kind": {"type": "keyword"},
                "parent_id": {"type": "keyword"},
                "status": {"type": "keyword"},
                "user_id": {"type": "keyword"},
                "session_id": {"type": "keyword"},
                **SCOPE_MAPPING,
            },
        },
    }


# Scopes and user metadata: added to an existing index's mapping too (new fields are allowed there).
# Metadata is held twice: `meta_kv`, one keyword token per key and typed value, for equality and IN;
# `meta_num`, nested {k, v} pairs of the numeric values, for ranges. A key never becomes a field name.
SCOPE_MAPPING = {
    **{field: {"type": "keyword"} for field in SCOPE_FIELDS},
    "meta_kv": {"type": "keyword"},
    "meta_num": {"type": "nested", "properties": {"k": {"type": "keyword"}, "v": {"type": "double"}}},
}


def metadata_token(key: str, value) -> str:
    """The `meta_kv` token of one value: strings and numbers never collide, 3 and 3.0 are one token."""
    return f"{key}\x1fs:{value}" if isinstance(value, str) else f"{key}\x1fn:{float(value)!r}"


def metadata_source(metadata: dict) -> dict:
    return {"meta_kv": [metadata_token(k, v) for k, v in metadata.items()],
            "meta_num": [{"k": k, "v": float(v)} for k, v in metadata.items() if not isinstance(v, str)]}


def _metadata_clause(cond) -> dict:
    if cond.op == "in":
        return {"terms": {"meta_kv": [metadata_token(cond.key, v) for v in cond.values]}}
    return {"nested": {"path": "meta_num", "query": {"bool": {"filter": [
        {"term": {"meta_num.k": cond.key}}, {"range": {"meta_num.v": {cond.op: float(cond.values[0])}}}]}}}}


def build_filter(flt: IndexFilter) -> list[dict]:
    """The bool-filter clauses for a clean `flt` (every field narrows; empty tuples do not)."""
    clauses: list[dict] = [{"term": {"tenant_id": flt.tenant_id}}, {"terms": {"kb_id": list(flt.kb_ids)}}]
    for field, values in (("kind", flt.kinds), ("document_id", flt.document_ids), ("parent_id", flt.parent_ids),
                          ("id", flt.ids), ("status", flt.statuses)):
        if field == "parent_id" and flt.or_ids:  # parent in parent_ids OR id in or_ids
            either = [{"terms": {f: list(v)}} for f, v in (("parent_id", values), ("id", flt.or_ids)) if v]
            clauses.append({"bool": {"should": either, "minimum_should_match": 1}})
        elif values:
            clauses.append({"terms": {field: list(values)}})
    for field in ("user_id", "session_id", *SCOPE_FIELDS):
        if getattr(flt, field) is not None:
            clauses.append({"term": {field: getattr(flt, field)}})
    clauses.extend(_metadata_clause(cond) for cond in flt.metadata)
    return clauses


def build_search_body(query_tokens: list[str], flt: IndexFilter, top_k: int) -> dict:
    """A BM25 search: any of the query terms must match, the filter narrows before ranking."""
    terms = list(dict.fromkeys(query_tokens))[:MAX_QUERY_TERMS]
    return {
        "size": min(top_k, MAX_RESULT_WINDOW),
        "query": {"bool": {
            "must": [{"match": {"text_seg": {"query": " ".join(terms), "operator": "or"}}}],
            "filter": build_filter(flt),
        }},
        "_source": HIT_FIELDS,
        "track_total_hits": False,
    }


class OpenSearchKeywordIndex:
    """KeywordIndex on OpenSearch: one index per alias, whitespace-analysed pre-segmented text."""

    # One per process: opensearch-py's client is thread-safe (urllib3 connection pool), and it is
    # created under a lock.
    thread_safe = True

    @staticmethod
    def transient(exc: BaseException) -> bool:
        """Not reached, timed out, or a status that says "later" (408, 429, 5xx)."""
        from opensearchpy import exceptions  # as the client is: loaded only when OpenSearch is used

        if isinstance(exc, exceptions.ConnectionError):  # ConnectionTimeout included
            return True
        return isinstance(exc, exceptions.TransportError) and exc.status_code in TRANSIENT_STATUSES

    @staticmethod
    def describe(options: dict) -> str:
        return f"OpenSearch at {options.get('url')}"

    @staticmethod
    def build_options(options: dict, build: int) -> dict:
        """The OPTIONS of projection build `build`: indexes of its own, `{prefix}-b{build}-...`."""
        return {**options, "index_prefix": f"{options.get('index_prefix') or 'loci'}-b{int(build)}"}

    def __init__(self, options: dict):
        self.url = options.get("url") or ""
        self.prefix = options.get("index_prefix") or "loci"
        if not self.url:
            raise ImproperlyConfigured("OpenSearchKeywordIndex needs OPTIONS['url'] (OPENSEARCH_URL).")
        if not _PREFIX_RE.match(self.prefix):
            raise ImproperlyConfigured(f"index_prefix {self.prefix!r} must match {_PREFIX_RE.pattern}")
        self.verify_certs = bool(options.get("verify_certs", True))
        self.timeout = float(options.get("timeout") or 30)
        # "wait_for": a write returns once its rows are searchable, which the indexing pipeline
        # promises ("ready" means findable); bulk loads may set False.
        self.refresh = options.get("refresh", "wait_for")
        self.shards, self.replicas = int(options.get("shards", 1)), int(options.get("replicas", 1))
        self._client_obj = None
        self._pid = 0
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def _client(self):
        if self._client_obj is None or self._pid != os.getpid():
            with self._lock:
                if self._client_obj is None or self._pid != os.getpid():
                    from opensearchpy import OpenSearch

                    self._client_obj = OpenSearch(
                        hosts=[self.url], verify_certs=self.verify_certs, timeout=self.timeout,
                        max_retries=3, retry_on_timeout=True, http_compress=True,
                    )
                    self._pid, self._known = os.getpid(), set()
        return self._client_obj

    def close(self) -> None:
        with self._lock:
            client, self._client_obj = self._client_obj, None
        if client is not None:
            client.close()

    def ping(self) -> None:
        """One cheap round trip to the cluster (the health check)."""
        self._client().info()

    def alias(self, tenant_id: int | None = None) -> str:
        """`{prefix}-shared-a2`, or `{prefix}-t{tenant}-a2` for an exclusive tenant (a2: the analyzer generation)."""
        name = "shared" if tenant_id is None else f"t{int(tenant_id)}"
        return f"{self.prefix}-{name}-a{ANALYZER_GENERATION}"

    def _ensure(self, alias: str) -> None:
        if alias in self._known:
            return
        from opensearchpy.exceptions import RequestError

        client = self._client()
        if not client.indices.exists_alias(name=alias):
            body = {**index_mapping(shards=self.shards, replicas=self.replicas), "aliases": {alias: {}}}
            try:
                # A concrete index behind the alias, so a rebuild can swap indexes without renaming.
                client.indices.create(index=f"{alias}-000001", body=body)
            except RequestError as exc:
                if "resource_already_exists" not in str(exc):  # a concurrent process won the race
                    raise
        else:  # an index made before scopes and metadata: their fields join its mapping (idempotent)
            client.indices.put_mapping(index=alias, body={"properties": SCOPE_MAPPING})
        self._known.add(alias)

    def _request(self, method: str, flt: IndexFilter, body: dict, **params) -> dict:
        """search / count / delete_by_query on the filter's alias; a missing index reads as empty."""
        from opensearchpy.exceptions import NotFoundError

        try:
            return getattr(self._client(), method)(index=self.alias(flt.tenant_id if flt.exclusive else None),
                                                   body=body, ignore_unavailable=True, **params)
        except NotFoundError:
            return {"hits": {"hits": []}, "count": 0, "deleted": 0}

    # --- KeywordIndex
    def upsert(self, rows: list[IndexRow], *, exclusive: bool = False) -> None:
        from opensearchpy.helpers import BulkIndexError, streaming_bulk

        actions: dict[str, list[dict]] = {}
        for row in clean_rows(rows):
            alias = self.alias(row.tenant_id if exclusive else None)
            actions.setdefault(alias, []).append({
                "_op_type": "index", "_index": alias, "_id": row.id,  # index by _id replaces: idempotent
                "_source": {
                    "id": row.id, "text_seg": segment(row.text), "tenant_id": row.tenant_id, "kb_id": row.kb_id,
                    "document_id": row.document_id, "kind": row.kind, "parent_id": row.parent_id,
                    "status": row.status, "user_id": row.user_id, "session_id": row.session_id,
                    **{field: getattr(row, field) for field in SCOPE_FIELDS}, **metadata_source(row.metadata),
                },
            })
        for alias, batch in actions.items():
            for attempt in (1, 2):
                self._ensure(alias)
                try:
                    # require_alias: if the index was dropped meanwhile, fail instead of letting
                    # OpenSearch auto-create one with a guessed mapping.
                    for _ in streaming_bulk(self._client(), batch, chunk_size=500, max_retries=3,
                                            require_alias=True, refresh=self.refresh):
                        pass
                    break
                except BulkIndexError:
                    self._known.discard(alias)
                    if attempt == 2:
                        raise

    def search(self, query: str, flt: IndexFilter, top_k: int) -> list[Hit]:
        flt, limit = clean_filter(flt), check_top_k(top_k)
        tokens = index_terms(check_query(query))
        if not tokens or matches_nothing(flt):
            return []
        found = self._request("search", flt, build_search_body(tokens, flt, limit))
        return [Hit(id=h["_id"], score=float(h["_score"]), extra={f: h["_source"].get(f) for f in HIT_FIELDS})
                for h in found["hits"]["hits"]]

    def count(self, flt: IndexFilter) -> int:
        flt = clean_filter(flt)
        if matches_nothing(flt):
            return 0
        return int(self._request("count", flt, {"query": {"bool": {"filter": build_filter(flt)}}})["count"])

    def ids(self, flt: IndexFilter) -> Iterator[str]:
        flt = clean_filter(flt)
        return iter(()) if matches_nothing(flt) else self._ids(flt)

    def _ids(self, flt: IndexFilter) -> Iterator[str]:
        body = {"size": PAGE, "query": {"bool": {"filter": build_filter(flt)}}, "sort": [{"id": "asc"}],
                "_source": False, "track_total_hits": False}
        while True:  # search_after on the id: no scroll context to keep alive or clean up
            hits = self._request("search", flt, body)["hits"]["hits"]
            yield from (h["_id"] for h in hits)
            if len(hits) < PAGE:
                return
            body["search_after"] = hits[-1]["sort"]

    def delete(self, flt: IndexFilter) -> int:
        flt = clean_filter(flt)
        if matches_nothing(flt):
            return 0
        # refresh: a search right after the delete must not see the rows any more.
        done = self._request("delete_by_query", flt, {"query": {"bool": {"filter": build_filter(flt)}}},
                             refresh=True, conflicts="proceed")
        return int(done.get("deleted", 0))

    def drop_all(self) -> None:
        # This analyzer generation's indexes and older ones (no "-a<n>" before generation 2).
        pattern = re.compile(rf"^{re.escape(self.prefix)}-(?:shared|t\d+)(?:-a\d+)?-\d{{6}}$")
        client = self._client()
        names = [n for n in client.indices.get(index=f"{self.prefix}-*", ignore_unavailable=True) if pattern.match(n)]
        for name in names:  # by exact name: "loci-*" alone would also match another deployment's "loci-test-*"
            client.indices.delete(index=name)
        self._known = set()
