"""OpenSearch request bodies, pinned; and the backend's requests, seen by a fake server at the HTTP edge.

There is no OpenSearch here: the contract suite runs against one only when OPENSEARCH_URL is set.
"""

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from retrieval.backends import clean_filter
from retrieval.backends.base import IndexFilter
from retrieval.backends.opensearch import (
    MAX_RESULT_WINDOW,
    OpenSearchKeywordIndex,
    build_filter,
    build_search_body,
    index_mapping,
)
from retrieval.text import tokenize
from tests.index_fixtures import make_row

HOSTILE = 'x" or tenant_id > 0 or "'


def flt(**kw):
    return clean_filter(IndexFilter(**{"tenant_id": 1, "kb_ids": (1, 2), **kw}))


def test_mapping_whitespace_analysed_text_bm25_and_keyword_filters():
    m = index_mapping()
    assert m["settings"]["analysis"]["analyzer"]["loci_whitespace"] == {"type": "custom", "tokenizer": "whitespace"}
    assert m["settings"]["similarity"]["loci_bm25"] == {"type": "BM25", "k1": 1.2, "b": 0.75}
    props = m["mappings"]["properties"]
    assert props["text_seg"] == {"type": "text", "analyzer": "loci_whitespace", "similarity": "loci_bm25"}
    for field in ("id", "tenant_id", "kb_id", "document_id", "kind", "parent_id", "status", "user_id", "session_id"):
        assert props[field] == {"type": "keyword"}
    assert m["mappings"]["dynamic"] == "strict"


def test_filter_clauses():
    assert build_filter(flt(kinds=("episode",), document_ids=(7, 8), parent_ids=("memory:p",), ids=("chunk:1",),
                            user_id="u", session_id="")) == [
        {"term": {"tenant_id": 1}}, {"terms": {"kb_id": [1, 2]}}, {"terms": {"kind": ["episode"]}},
        {"terms": {"document_id": [7, 8]}}, {"terms": {"parent_id": ["memory:p"]}}, {"terms": {"id": ["chunk:1"]}},
        {"terms": {"status": ["active"]}}, {"term": {"user_id": "u"}}, {"term": {"session_id": ""}},
    ]
    assert build_filter(flt(statuses=())) == [{"term": {"tenant_id": 1}}, {"terms": {"kb_id": [1, 2]}}]
    assert build_filter(flt(parent_ids=("memory:p",), or_ids=("memory:a",), statuses=())) == [
        {"term": {"tenant_id": 1}}, {"terms": {"kb_id": [1, 2]}},
        {"bool": {"should": [{"terms": {"parent_id": ["memory:p"]}}, {"terms": {"id": ["memory:a"]}}],
                  "minimum_should_match": 1}},
    ]


def test_hostile_values_stay_plain_term_values():
    clauses = build_filter(flt(user_id=HOSTILE, parent_ids=(HOSTILE, "*"), session_id="') OR 1=1 --"))
    assert {"term": {"user_id": HOSTILE}} in clauses
    assert {"terms": {"parent_id": [HOSTILE, "*"]}} in clauses
    assert {"term": {"session_id": "') OR 1=1 --"}} in clauses


def test_scope_and_metadata_clauses_keep_hostile_values_as_values():
    from retrieval.backends.base import MetadataCondition
    from retrieval.backends.opensearch import metadata_source

    clauses = build_filter(flt(agent_id=HOSTILE, group_id="", run_id="r1", metadata=(
        MetadataCondition("tag", "in", (HOSTILE, 3)), MetadataCondition("chapter", "gte", (2,)))))
    assert {"term": {"agent_id": HOSTILE}} in clauses and {"term": {"group_id": ""}} in clauses
    assert {"terms": {"meta_kv": [f"tag\x1fs:{HOSTILE}", "tag\x1fn:3.0"]}} in clauses
    assert {"nested": {"path": "meta_num", "query": {"bool": {"filter": [
        {"term": {"meta_num.k": "chapter"}}, {"range": {"meta_num.v": {"gte": 2.0}}}]}}}} in clauses
    assert metadata_source({"tag": HOSTILE, "chapter": 3}) == {
        "meta_kv": [f"tag\x1fs:{HOSTILE}", "chapter\x1fn:3.0"], "meta_num": [{"k": "chapter", "v": 3.0}]}
    props = index_mapping()["mappings"]["properties"]
    assert props["agent_id"] == props["run_id"] == {"type": "keyword"} and props["meta_num"]["type"] == "nested"


def test_search_body():
    assert build_search_body(["c++", "node.js", "c++"], flt(), 10) == {
        "size": 10,
        "query": {"bool": {
            "must": [{"match": {"text_seg": {"query": "c++ node.js", "operator": "or"}}}],
            "filter": [{"term": {"tenant_id": 1}}, {"terms": {"kb_id": [1, 2]}}, {"terms": {"status": ["active"]}}],
        }},
        "_source": ["kind", "kb_id", "document_id", "parent_id"],
        "track_total_hits": False,
    }
    assert build_search_body(["x"], flt(), 16384)["size"] == MAX_RESULT_WINDOW


def test_hostile_query_text_is_only_match_text():
    body = build_search_body(tokenize('") OR tenant_id:2 -- NEAR( * {"match_all": {}}'), flt(), 5)
    assert body["query"]["bool"]["must"] == [
        {"match": {"text_seg": {"query": "tenant_id tenant id 2 near match_all match", "operator": "or"}}}]
    assert "query_string" not in json.dumps(body)


# --- the backend against a fake OpenSearch at the HTTP edge


class FakeOpenSearch(BaseHTTPRequestHandler):
    requests: list = []
    indices: set = set()
    search_pages: list = []

    def log_message(self, *args):
        pass

    def _reply(self, status, payload=None):
        data = json.dumps(payload or {}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _handle(self):
        url = urlparse(self.path)
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        raw = (gzip.decompress(raw) if self.headers.get("content-encoding") == "gzip" else raw).decode()
        body = [json.loads(line) for line in raw.splitlines() if line] if url.path == "/_bulk" else (
            json.loads(raw) if raw else None)
        self.requests.append((self.command, url.path, {k: v[0] for k, v in parse_qs(url.query).items()}, body))
        name = url.path.strip("/").split("/")[0]
        if self.command == "HEAD" and url.path.startswith("/_alias/"):
            return self._reply(200 if any(i.startswith(url.path[8:] + "-") for i in self.indices) else 404)
        if self.command == "PUT":
            self.indices.add(name)
            return self._reply(200, {"acknowledged": True})
        if url.path == "/_bulk":
            return self._reply(200, {"errors": False, "items": [{"index": {"status": 201}} for _ in body[::2]]})
        if not any(i.startswith(name + "-") or i == name for i in self.indices) and "*" not in name:
            return self._reply(404, {"error": {"type": "index_not_found_exception"}, "status": 404})
        if url.path.endswith("/_search"):
            return self._reply(200, {"hits": {"hits": self.search_pages.pop(0) if self.search_pages else []}})
        if url.path.endswith("/_count"):
            return self._reply(200, {"count": 3})
        if url.path.endswith("/_delete_by_query"):
            return self._reply(200, {"deleted": 2})
        if self.command == "GET":
            return self._reply(200, {i: {} for i in sorted(self.indices)})
        if self.command == "DELETE":
            self.indices.discard(name)
            return self._reply(200, {"acknowledged": True})
        return self._reply(400)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


@pytest.fixture
def fake():
    FakeOpenSearch.requests, FakeOpenSearch.indices, FakeOpenSearch.search_pages = [], set(), []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenSearch)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    index = OpenSearchKeywordIndex({"url": f"http://127.0.0.1:{server.server_port}", "index_prefix": "loci"})
    yield index, FakeOpenSearch
    index.close()
    server.shutdown()


def test_upsert_creates_the_index_once_then_bulk_indexes_segmented_rows(fake):
    index, server = fake
    index.upsert([make_row("chunk:1", "Deploy NODE.js, 中华人民共和国", document_id=4)])
    index.upsert([make_row("chunk:2", "C++ templates", tenant_id=7)], exclusive=True)
    index.upsert([make_row("chunk:3", "again")])
    creates = [(path, body) for method, path, _, body in server.requests if method == "PUT"]
    assert [path for path, _ in creates] == ["/loci-shared-a2-000001", "/loci-t7-a2-000001"]
    assert creates[0][1] == {**index_mapping(), "aliases": {"loci-shared-a2": {}}}
    bulks = [(params, body) for method, path, params, body in server.requests if path == "/_bulk"]
    assert [params for params, _ in bulks] == [{"require_alias": "true", "refresh": "wait_for"}] * 3
    action, source = bulks[0][1]
    assert action == {"index": {"_index": "loci-shared-a2", "_id": "chunk:1"}}
    assert source["text_seg"] == "deploy node.js node js 中华 华人 人民 共和 共和国 中华人民共和国"
    assert {k: source[k] for k in ("id", "tenant_id", "kb_id", "document_id", "kind", "status")} == {
        "id": "chunk:1", "tenant_id": 1, "kb_id": 1, "document_id": 4, "kind": "chunk", "status": "active"}
    assert bulks[1][1][0] == {"index": {"_index": "loci-t7-a2", "_id": "chunk:2"}}


def test_search_sends_the_pinned_body_and_reads_hits(fake):
    index, server = fake
    index.upsert([make_row("chunk:1", "x")])
    server.search_pages = [[{"_id": "chunk:1", "_score": 2.5, "_source": {"kind": "chunk", "kb_id": 1,
                                                                          "document_id": 0, "parent_id": ""}}]]
    f = flt(user_id=HOSTILE)
    hits = index.search("C++ and node.js", f, 5)
    assert [(h.id, h.score, h.extra["kind"]) for h in hits] == [("chunk:1", 2.5, "chunk")]
    method, path, params, body = server.requests[-1]
    assert (method, path, params) == ("POST", "/loci-shared-a2/_search", {"ignore_unavailable": "true"})
    assert body == build_search_body(["c++", "node.js", "node", "js"], f, 5)


def test_count_delete_and_ids_use_the_same_filter(fake):
    index, server = fake
    index.upsert([make_row("chunk:1", "x", tenant_id=7)], exclusive=True)
    f = flt(tenant_id=7, exclusive=True, document_ids=(3,), statuses=())
    assert index.count(f) == 3
    assert index.delete(f) == 2
    server.search_pages = [[{"_id": f"c{n}", "sort": [f"c{n}"]} for n in range(1000)],
                           [{"_id": "last", "sort": ["last"]}]]
    assert len(list(index.ids(f))) == 1001
    query = {"bool": {"filter": build_filter(f)}}
    count, delete, page1, page2 = server.requests[-4:]
    assert count[1:] == ("/loci-t7-a2/_count", {"ignore_unavailable": "true"}, {"query": query})
    assert delete[1:] == ("/loci-t7-a2/_delete_by_query",
                          {"ignore_unavailable": "true", "refresh": "true", "conflicts": "proceed"}, {"query": query})
    assert page1[3]["query"] == query and page1[3]["sort"] == [{"id": "asc"}] and "search_after" not in page1[3]
    assert page2[3]["search_after"] == ["c999"]


def test_missing_index_reads_as_empty(fake):
    index, _ = fake
    f = flt(tenant_id=9, exclusive=True)
    assert (index.search("hello", f, 5), index.count(f), list(index.ids(f)), index.delete(f)) == ([], 0, [], 0)


def test_nothing_is_sent_for_an_empty_query_or_no_permitted_kb(fake):
    index, server = fake
    assert index.search("the of and", flt(), 5) == [] and index.search("hello", flt(kb_ids=()), 5) == []
    assert index.count(flt(kb_ids=())) == 0 and index.delete(flt(kb_ids=())) == 0
    assert server.requests == []


def test_drop_all_deletes_only_this_prefix(fake):
    index, server = fake
    # Older analyzer generations had no "-a<n>"; drop_all removes them too.
    server.indices |= {"loci-shared-a2-000001", "loci-t3-a2-000001", "loci-shared-000001", "loci-t3-000001",
                       "loci-test-shared-000001", "loci-test-shared-a2-000001", "loci-other"}
    index.drop_all()
    assert server.indices == {"loci-test-shared-000001", "loci-test-shared-a2-000001", "loci-other"}
