"""The contract every index backend passes (tests/test_index_contract.py runs it over each backend fixture).

Vector backends are queried with hash_vector(text), keyword backends with the text itself, so the
same test reads the same for both. Filter results are compared with reference_match, the filter
semantics written out in Python (tests/index_fixtures.py), apart from the backends' own code.
Assertions here are rewritten by pytest like a test module's (tests/conftest.py registers it).
"""

import random
from dataclasses import replace

import pytest

from retrieval.backends.base import IndexFilter, MetadataCondition
from tests.index_fixtures import hash_vector, make_row, reference_match

HOSTILE = ['x" or tenant_id > 0 or "', "') OR 1=1 --", '" || "', "\\", '\\" or id != "', "*", "%", "a\nb"]


def flt(tenant_id=1, kb_ids=(1,), **kw) -> IndexFilter:
    return IndexFilter(tenant_id=tenant_id, kb_ids=kb_ids, **kw)


def grid_rows():
    """60 rows that differ in every filterable field, all containing the term "apple"."""
    rnd = random.Random(7)
    rows = []
    for n in range(60):
        rows.append(make_row(
            f"chunk:{n}", "apple pie recipe", tenant_id=rnd.choice((1, 2)), kb_id=rnd.choice((1, 2)),
            kind=rnd.choice(("chunk", "atomic_fact")), document_id=rnd.choice((10, 11)),
            parent_id=rnd.choice(("", "memory:p1")), status=rnd.choice(("active", "disabled")),
            user_id=rnd.choice(("", "u1")), session_id=rnd.choice(("", "s1")),
        ))
    # Scopes and metadata drawn from their own generator, so the fields above stay as they were.
    scoped = random.Random(11)
    for row in rows:
        row.agent_id = scoped.choice(("", "agent-a", "agent-b"))
        row.group_id = scoped.choice(("", "g1"))
        row.run_id = scoped.choice(("", "r1"))
        row.metadata = scoped.choice(({}, {"category": "news"}, {"category": "sport", "chapter": 3},
                                      {"chapter": 7.5}, {"chapter": "3"}, {"source": "crm", "chapter": 12}))
    return rows


def meta(key, op, *values):
    return MetadataCondition(key, op, values)


meta_condition = meta  # where a local name `meta` (a table name) shadows it


GRID_FILTERS = [
    flt(), flt(2), flt(kb_ids=(1, 2)), flt(kb_ids=(2,)), flt(kinds=("atomic_fact",)), flt(document_ids=(11,)),
    flt(parent_ids=("memory:p1",)), flt(statuses=()), flt(statuses=("disabled",)), flt(user_id="u1"),
    flt(user_id=""), flt(session_id="s1"), flt(ids=("chunk:1", "chunk:2", "chunk:3", "chunk:40")),
    flt(2, (1, 2), kinds=("chunk",), document_ids=(10,), user_id="u1", session_id="", statuses=()),
    flt(parent_ids=("memory:p1",), or_ids=("chunk:1", "chunk:2", "chunk:3", "chunk:40")),  # either
    flt(or_ids=("chunk:1", "chunk:2", "chunk:3")), flt(kinds=("chunk",), parent_ids=("memory:p1",), or_ids=("chunk:5",)),
    # one case per scope, "" being the rows of no agent (what a user-level search sees by default)
    flt(agent_id="agent-a"), flt(agent_id=""), flt(group_id="g1"), flt(group_id=""), flt(run_id="r1"),
    flt(agent_id="agent-b", group_id="g1", run_id="", user_id="u1", statuses=()),
    # metadata: equality, IN, numbers by value (3 == 3.0, never "3"), ranges on numbers only
    flt(metadata=(meta("category", "in", "news"),)), flt(metadata=(meta("category", "in", "news", "sport"),)),
    flt(metadata=(meta("chapter", "in", 3.0),)), flt(metadata=(meta("chapter", "in", "3"),)),
    flt(metadata=(meta("chapter", "gte", 7.5),)), flt(metadata=(meta("chapter", "lt", 10),)),
    flt(metadata=(meta("chapter", "gt", 3), meta("chapter", "lte", 12))),
    flt(kb_ids=(1, 2), statuses=(), metadata=(meta("category", "in", "sport"), meta("chapter", "in", 3))),
    flt(kb_ids=(1, 2), agent_id="agent-a", statuses=(), metadata=(meta("chapter", "gte", 3),)),
]


class IndexContract:
    """Behaviour shared by vector and keyword indexes; subclasses supply `index` and `search`."""

    def search(self, index, text, flt, top_k=100):
        raise NotImplementedError

    def test_it_names_its_engine_and_calls_no_error_of_ours_transient(self, index):
        # The optional class attributes of base._IndexContract, read by retrieval.backends.
        backend = type(index)
        describe = getattr(backend, "describe", None)
        assert describe is None or isinstance(describe({}), str) and describe({})
        transient = getattr(backend, "transient", None)
        assert transient is None or not any(transient(e) for e in (ValueError("bad"), KeyError("x"), RuntimeError()))

    def test_upsert_then_search_finds_rows(self, index):
        index.upsert([make_row("chunk:1", "the quarterly revenue report"), make_row("chunk:2", "holiday schedule")])
        hits = self.search(index, "quarterly revenue", flt(), 5)
        assert hits[0].id == "chunk:1"
        assert hits[0].extra == {"kind": "chunk", "kb_id": 1, "document_id": 0, "parent_id": ""}

    def test_upsert_same_id_twice_keeps_one_row_with_the_new_content(self, index):
        index.upsert([make_row("memory:a", "old text about tulips", kind="episode")])
        index.upsert([make_row("memory:a", "new text about roses", kind="atomic_fact")])
        index.upsert([make_row("memory:a", "new text about roses", kind="atomic_fact")] * 2)
        assert index.count(flt()) == 1
        assert list(index.ids(flt())) == ["memory:a"]
        hit = self.search(index, "roses", flt(), 5)[0]
        assert (hit.id, hit.extra["kind"]) == ("memory:a", "atomic_fact")

    def test_filters_apply_before_top_k(self, index):
        index.upsert([make_row(f"chunk:t2-{n}", "invoice total", tenant_id=2) for n in range(50)])
        mine = [make_row(f"chunk:t1-{n}", f"invoice total with extra words number {n}") for n in range(3)]
        index.upsert(mine)
        assert self.search(index, "invoice total", flt(2), 3)[0].id.startswith("chunk:t2-")  # they do rank higher
        hits = self.search(index, "invoice total", flt(), 3)
        assert sorted(h.id for h in hits) == sorted(r.id for r in mine)

    @pytest.mark.parametrize("f", GRID_FILTERS, ids=lambda f: ",".join(
        f"{k}={v}" for k, v in vars(f).items() if v not in ((), None, False)))
    def test_every_filter_field_narrows_search_count_and_ids(self, index, f):
        rows = grid_rows()
        index.upsert(rows)
        expected = {r.id for r in rows if reference_match(r, f)}
        assert expected, "the grid should cover every filter"
        assert {h.id for h in self.search(index, "apple", f)} == expected
        assert index.count(f) == len(expected)
        assert set(index.ids(f)) == expected

    def test_default_filter_sees_only_active_rows(self, index):
        index.upsert([make_row("memory:on", "budget plan"), make_row("memory:off", "budget plan", status="disabled")])
        assert [h.id for h in self.search(index, "budget plan", flt())] == ["memory:on"]

    def test_no_permitted_kb_matches_nothing(self, index):
        index.upsert([make_row("chunk:1", "budget plan")])
        nothing = flt(kb_ids=())
        assert self.search(index, "budget plan", nothing) == []
        assert (index.count(nothing), list(index.ids(nothing))) == (0, [])
        assert index.delete(nothing) == 0
        assert index.count(flt()) == 1

    def test_delete_by_document_and_by_kb_removes_only_those(self, index):
        index.upsert([make_row("chunk:1", "alpha", document_id=5), make_row("chunk:2", "alpha", document_id=6),
                      make_row("chunk:3", "alpha", kb_id=2, document_id=7),
                      make_row("chunk:4", "alpha", tenant_id=2, document_id=5)])
        assert index.delete(flt(kb_ids=(1, 2), document_ids=(5,), statuses=())) == 1
        assert set(index.ids(flt(kb_ids=(1, 2)))) == {"chunk:2", "chunk:3"}
        assert index.delete(flt(kb_ids=(2,), statuses=())) == 1
        assert set(index.ids(flt(kb_ids=(1, 2)))) == {"chunk:2"}
        assert list(index.ids(flt(2))) == ["chunk:4"]
        assert [h.id for h in self.search(index, "alpha", flt(kb_ids=(1, 2)))] == ["chunk:2"]

    def test_ids_pages_past_one_thousand(self, index):
        rows = [make_row(f"chunk:{n}", "bulk row") for n in range(1005)]
        index.upsert(rows)
        ids = list(index.ids(flt()))
        assert len(ids) == 1005 and set(ids) == {r.id for r in rows}
        assert index.count(flt()) == 1005

    def test_exclusive_tenants_are_kept_apart(self, index):
        index.upsert([make_row("chunk:a1", "secret merger plan", tenant_id=1)], exclusive=True)
        index.upsert([make_row("chunk:b1", "secret merger plan", tenant_id=2)], exclusive=True)
        index.upsert([make_row("chunk:s1", "secret merger plan", tenant_id=1)])  # a shared row of tenant 1
        assert [h.id for h in self.search(index, "merger plan", flt(exclusive=True))] == ["chunk:a1"]
        assert [h.id for h in self.search(index, "merger plan", flt())] == ["chunk:s1"]
        assert self.search(index, "merger plan", flt(3, exclusive=True)) == []  # no table set: empty, no error
        assert index.delete(flt(2, exclusive=True, statuses=())) == 1
        assert index.count(flt(exclusive=True)) == 1
        assert list(index.ids(flt(exclusive=True))) == ["chunk:a1"]

    @pytest.mark.parametrize("field", ["user_id", "session_id", "parent_ids", "or_ids", "kinds", "statuses", "ids"])
    def test_hostile_filter_values_return_nothing(self, index, field):
        index.upsert([make_row("chunk:1", "payroll data", tenant_id=2), make_row("chunk:2", "payroll data")])
        for value in HOSTILE:
            hostile = flt(**{field: (value,) if field.endswith("s") else value})
            assert self.search(index, "payroll data", hostile) == [], value
            assert index.count(hostile) == 0, value
            assert list(index.ids(hostile)) == [], value
            assert index.delete(replace(hostile, statuses=() if field != "statuses" else (value,))) == 0, value
        assert index.count(flt(2)) == 1 and index.count(flt()) == 1

    @pytest.mark.parametrize("field", ["agent_id", "group_id", "run_id", "metadata"])
    def test_hostile_scope_and_metadata_values_are_only_values(self, index, field):
        """A hostile scope or metadata value finds nothing but the row that holds exactly that value."""
        for n, value in enumerate(HOSTILE):
            bad_row = {"metadata": {"tag": value}} if field == "metadata" else {field: value}
            index.upsert([make_row(f"chunk:h{n}", "payroll data", **bad_row)])
        index.upsert([make_row("chunk:plain", "payroll data", metadata={"tag": "plain"})])
        for n, value in enumerate(HOSTILE):
            wanted = {f"chunk:h{n}"} if "\n" not in value else set()  # Milvus cannot spell a newline
            hostile = flt(metadata=(meta("tag", "in", value),)) if field == "metadata" else flt(**{field: value})
            found = {h.id for h in self.search(index, "payroll data", hostile)}
            assert found in (wanted, {f"chunk:h{n}"}), value
            assert index.count(hostile) == len(found), value
        assert index.count(flt()) == len(HOSTILE) + 1

    @pytest.mark.parametrize("bad", [
        {"agent_id": 3}, {"run_id": ("r1",)},
        {"metadata": (MetadataCondition('x") or 1==1 or ("', "in", ("a",)),)},
        {"metadata": (MetadataCondition("a.b", "in", ("a",)),)}, {"metadata": (MetadataCondition("a", "in", ()),)},
        {"metadata": (MetadataCondition("a", "gte", ("3",)),)}, {"metadata": (MetadataCondition("a", "like", (1,)),)},
        {"metadata": (MetadataCondition("a", "in", (True,)),)}, {"metadata": (MetadataCondition("a", "lt", (float("nan"),)),)},
        {"metadata": ("category=news",)},
    ])
    def test_wrong_scope_or_metadata_filters_are_refused(self, index, bad):
        f = IndexFilter(**{"tenant_id": 1, "kb_ids": (1,), **bad})
        for call in (lambda: self.search(index, "x", f), lambda: index.count(f), lambda: index.ids(f),
                     lambda: index.delete(f)):
            with pytest.raises(ValueError):
                call()

    @pytest.mark.parametrize("metadata", [{"bad key": "x"}, {'k"': 1}, {"k": True}, {"k": [1, 2]}, {"k": "x" * 201},
                                          {f"k{n}": n for n in range(17)}, {"k": float("inf")}])
    def test_rows_with_bad_metadata_are_refused(self, index, metadata):
        with pytest.raises(ValueError):
            index.upsert([make_row("chunk:1", "payroll data", metadata=metadata)])

    def test_a_row_keeps_its_scopes_and_metadata_when_replaced(self, index):
        index.upsert([make_row("memory:a", "trip to kyoto", agent_id="travel-bot", metadata={"category": "travel"})])
        index.upsert([make_row("memory:a", "trip to kyoto", agent_id="", metadata={"category": "work"})])
        assert self.search(index, "kyoto", flt(agent_id="travel-bot")) == []
        assert [h.id for h in self.search(index, "kyoto", flt(agent_id="", metadata=(meta("category", "in", "work"),)))] \
            == ["memory:a"]
        assert index.delete(flt(agent_id="", statuses=())) == 1

    @pytest.mark.parametrize("bad", [{"tenant_id": "1 or 1=1"}, {"tenant_id": True}, {"kb_ids": ("1",)},
                                     {"kb_ids": "12"}, {"document_ids": (1.5,)}, {"user_id": 7}, {"kinds": "chunk"}])
    def test_wrongly_typed_filter_values_are_refused(self, index, bad):
        f = IndexFilter(**{"tenant_id": 1, "kb_ids": (1,), **bad})
        for call in (lambda: self.search(index, "x", f), lambda: index.count(f), lambda: index.ids(f),
                     lambda: index.delete(f)):
            with pytest.raises(ValueError):
                call()

    def test_top_k_is_validated(self, index):
        for top_k in (0, -2, 10**6, "5"):
            with pytest.raises(ValueError):
                self.search(index, "x", flt(), top_k)

    def test_chinese_query_finds_chinese_rows(self, index):
        index.upsert([make_row("chunk:zh1", "机器学习是人工智能的一个重要分支"),
                      make_row("chunk:zh2", "今天天气很好，我们去公园散步"),
                      make_row("chunk:en", "machine learning is a branch of artificial intelligence")])
        assert self.search(index, "人工智能", flt(), 3)[0].id == "chunk:zh1"
        assert self.search(index, "公园散步", flt(), 3)[0].id == "chunk:zh2"

    def test_ping_answers(self, index):
        index.ping()

    def test_drop_all_empties_every_table_set(self, index):
        index.upsert([make_row("chunk:1", "alpha")])
        index.upsert([make_row("chunk:2", "alpha", tenant_id=4)], exclusive=True)
        index.drop_all()
        assert index.count(flt()) == 0 and index.count(flt(4, exclusive=True)) == 0
        index.upsert([make_row("chunk:3", "alpha")])  # usable again afterwards
        assert list(index.ids(flt())) == ["chunk:3"]


class KeywordContract(IndexContract):
    def search(self, index, text, flt, top_k=100):
        return index.search(text, flt, top_k)

    def test_cpp_matches_cpp_but_not_c(self, index):
        index.upsert([make_row("chunk:cpp", "templates in C++ are powerful"),
                      make_row("chunk:c", "pointers in C are tricky"),
                      make_row("chunk:cs", "C# has generics"), make_row("chunk:node", "we deploy node.js services")])
        assert [h.id for h in index.search("c++", flt(), 10)] == ["chunk:cpp"]
        assert [h.id for h in index.search("C#", flt(), 10)] == ["chunk:cs"]
        assert [h.id for h in index.search("c", flt(), 10)] == ["chunk:c"]
        assert [h.id for h in index.search("node.js", flt(), 10)] == ["chunk:node"]

    @pytest.mark.parametrize("query", ['") OR tenant_id:2 --', "NEAR(", "*", '"', "tenant_id:2 OR *", "kb_id:2",
                                       "payroll OR NOT x", "payroll* ^", "(payroll", "payroll AND"])
    def test_hostile_query_text_neither_errors_nor_widens(self, index, query):
        index.upsert([make_row("chunk:other", "payroll tenant_id 2 near kb_id or not", tenant_id=2),
                      make_row("chunk:kb2", "payroll tenant_id 2 near kb_id or not", kb_id=2),
                      make_row("chunk:mine", "payroll tenant_id 2 near kb_id or not")])
        assert {h.id for h in index.search(query, flt(), 10)} <= {"chunk:mine"}

    def test_scores_are_positive_and_best_first(self, index):
        index.upsert([make_row("chunk:1", "apple apple apple"),
                      make_row("chunk:2", "apple banana cherry date elder fig"),
                      *(make_row(f"chunk:{n}", "banana kiwi lemon") for n in range(3, 8))])
        hits = index.search("apple", flt(), 10)
        assert [h.id for h in hits] == ["chunk:1", "chunk:2"]
        assert hits[0].score > hits[1].score > 0

    def test_scores_equal_a_reference_bm25(self, index):
        """BM25 written out (k1 1.2, b 0.75) with the idf the backend declares (`bm25_idf`): FTS5's
        ln((N - n + 0.5)/(n + 0.5)) floored at 1e-6, or Lucene's ln(1 + (N - n + 0.5)/(n + 0.5))."""
        import math

        from retrieval.text import index_terms

        variant = getattr(type(index), "bm25_idf", None)
        if variant is None:
            pytest.skip("the backend declares no BM25 idf variant (bm25_idf), so its scores have no reference")
        texts = ["apple banana apple", "banana cherry", "cherry apple date elder", "fig"]
        index.upsert([make_row(f"chunk:{n}", t) for n, t in enumerate(texts)])
        docs = [index_terms(t) for t in texts]
        avgdl = sum(map(len, docs)) / len(docs)
        idfs = {"fts5": lambda n: max(math.log((len(docs) - n + 0.5) / (n + 0.5)), 1e-6),
                "lucene": lambda n: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5))}

        def bm25(query, doc, k1=1.2, b=0.75):
            score = 0.0
            for term in index_terms(query):
                idf = idfs[variant](sum(term in d for d in docs))
                f = doc.count(term)
                score += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(doc) / avgdl))
            return score

        for query in ("apple", "cherry date", "banana fig"):
            got = {h.id: h.score for h in index.search(query, flt(), 10)}
            want = {f"chunk:{n}": bm25(query, d) for n, d in enumerate(docs) if bm25(query, d) > 0}
            assert got.keys() == want.keys()
            assert all(math.isclose(got[k], want[k], rel_tol=1e-6) for k in want)  # tantivy scores in float32

    def test_upsert_replaces_the_old_terms(self, index):
        index.upsert([make_row("memory:a", "old text about tulips"), make_row("memory:b", "tulips too")])
        index.upsert([make_row("memory:a", "new text about roses")])
        assert [h.id for h in index.search("tulips", flt(), 10)] == ["memory:b"]
        assert [h.id for h in index.search("roses", flt(), 10)] == ["memory:a"]

    def test_an_inflected_english_word_finds_its_other_forms(self, index):
        index.upsert([make_row("chunk:dogs", "Their names are Pepper and Panda, my two dogs"),
                      make_row("chunk:ran", "She was running the marathon"),
                      make_row("chunk:zh", "小狗的名字")])
        assert [h.id for h in index.search("What is the name of Audrey's dog?", flt(), 10)] == ["chunk:dogs"]
        assert [h.id for h in index.search("runs", flt(), 10)] == ["chunk:ran"]
        assert [h.id for h in index.search("名字", flt(), 10)] == ["chunk:zh"]

    def test_empty_or_stopword_query_returns_nothing(self, index):
        index.upsert([make_row("chunk:1", "the and of")])
        assert index.search("the and of", flt(), 10) == [] and index.search("", flt(), 10) == []
        with pytest.raises(ValueError):
            index.search(None, flt(), 10)


class VectorContract(IndexContract):
    def search(self, index, text, flt, top_k=100):
        return index.search(hash_vector(text), flt, top_k)

    def test_scores_are_cosine_similarity_and_min_score_is_a_floor(self, index):
        east, north = [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]
        index.upsert([make_row("chunk:e", "e", vector=east), make_row("chunk:ne", "ne", vector=[0.6, 0.8, 0.0, 0.0]),
                      make_row("chunk:n", "n", vector=north)])
        hits = index.search(east, flt(), 10)
        assert [h.id for h in hits] == ["chunk:e", "chunk:ne", "chunk:n"]
        assert [round(h.score, 4) for h in hits] == [1.0, 0.6, 0.0]
        assert [h.id for h in index.search(east, flt(), -1, min_score=0.5)] == ["chunk:e", "chunk:ne"]

    def test_search_many_answers_what_search_answers_for_each_vector(self, index):
        east, north = [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]
        index.upsert([make_row("chunk:e", "e", vector=east), make_row("chunk:ne", "ne", vector=[0.6, 0.8, 0.0, 0.0]),
                      make_row("chunk:n", "n", vector=north, document_id=7)])
        for f in (flt(), flt(document_ids=(7,))):
            many = index.search_many([east, north], f, 2, min_score=0.5)
            assert [[(h.id, round(h.score, 4)) for h in hits] for hits in many] == [
                [(h.id, round(h.score, 4)) for h in index.search(v, f, 2, min_score=0.5)] for v in (east, north)]
        assert [[h.id for h in hits] for hits in index.search_many([east, north], flt(), 1)] == [["chunk:e"],
                                                                                              ["chunk:n"]]
        assert index.search_many([], flt(), 5) == []

    def test_each_dimension_has_its_own_collection(self, index):
        index.upsert([make_row("chunk:64", "alpha"), make_row("chunk:16", "alpha", dim=16)])
        assert [h.id for h in index.search(hash_vector("alpha", 16), flt(), 10)] == ["chunk:16"]
        assert [h.id for h in index.search(hash_vector("alpha", 8), flt(), 10)] == []
        assert index.count(flt()) == 2  # count, ids and delete cover every dimension
        assert index.delete(flt(statuses=())) == 2

    def test_rows_without_vectors_are_refused(self, index):
        with pytest.raises(ValueError):
            index.upsert([replace(make_row("chunk:1", "x"), vector=None)])
