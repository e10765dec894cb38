"""The cross-language shift on the embedded default: the vector index says each hit's script, so
search reads no text for it (retrieval/search/hybrid.py, CosineShifts)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from retrieval.backends import vector_index
from retrieval.backends.sqlite_vectors import SqliteVectorIndex
from retrieval.search import hybrid
from tenants.access import permitted_scope
from tests.test_pipeline import find, ingest_one_story_in_two_languages

pytestmark = pytest.mark.usefixtures("warm_embedding_cache")


def test_the_vector_index_tells_each_hits_script_so_no_text_is_read_for_the_shift(world, monkeypatch, tmp_path):
    """The embedded vector index keeps each row's script (IndexRow.script): hybrid and vector then
    apply the cross-language shift without reading any text, and answer as when the texts are read
    (a hit without a script: an index written before the field, or a backend that drops it)."""
    assert isinstance(vector_index(), SqliteVectorIndex)  # the embedded default, not Milvus
    alice_scope = permitted_scope(world.alice, write=True)
    ingest_one_story_in_two_languages(alice_scope, world.docs, tmp_path)

    def answered(query, method):
        with CaptureQueriesContext(connection) as queries:
            found = find(alice_scope, query, top_k=5, method=method)
        texts_read = sum("SUBSTR" in q["sql"].upper() for q in queries.captured_queries)
        items = [(i["id"], i["score"], i["scores"]) for key in ("facts", "episodes", "chunks") for i in found[key]]
        return items, texts_read

    shifted = 0
    for query in ("极光站的游客参观什么时候结束？", "When did tourist visits to Aurora Station end?"):
        for method in ("hybrid", "vector"):
            told, reads_told = answered(query, method)
            monkeypatch.setattr(hybrid.CosineShifts, "learn", lambda self, *hits: None)  # as with no scripts
            read, reads_read = answered(query, method)
            monkeypatch.undo()
            assert told and told == read
            assert reads_told == 0 and reads_read > 0, (method, reads_told, reads_read)
            shifted += sum("cross_language" in scores for _, _, scores in told)
    assert shifted  # the shift did apply
