"""A fact from a transcript cites the cue it was said in, not the window of cues its chunk packs (issue 16)."""

import pytest

from ingest.parsing.vtt import read_cues
from ingest.tasks import run_inline
from memory.models import Chunk, Document, Memory
from retrieval.results import cue_span, memory_sources
from tests.conftest import SHARED_DATA, api_client

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "warm_embedding_cache")

CAPTIONS = SHARED_DATA / "docs" / "vtt" / "videojs-elephantsdream" / "captions.en.vtt"


def test_a_fact_from_a_vtt_file_cites_its_own_cue_through_the_api(world, django_capture_on_commit_callbacks):
    client = api_client(world.alice_key)
    with CAPTIONS.open("rb") as fh, django_capture_on_commit_callbacks(execute=False):
        assert client.post("/api/v1/documents", {"kb": "docs", "files": [fh]}, format="multipart").status_code == 201
    doc = run_inline(Document.objects.get(filename=CAPTIONS.name).pk)
    assert doc.status == "ready", doc.error
    # "Emo. the machine is like clockwork." is cue 27, 00:04:31.126–00:04:34.491, packed with the cues
    # of 00:04:27–00:04:51 into one chunk.
    window = Chunk.objects.get(document=doc, level="child", text__contains="clockwork")
    assert window.start_time < 271 and window.end_time > 290

    response = client.post("/api/v1/memories/search", {"query": "the machine is like clockwork", "method": "hybrid"},
                           format="json")
    assert response.status_code == 200, response.json()
    fact = next(f for f in response.json()["facts"] if "clockwork" in f["atomic_fact"])
    source = fact["sources"][0]
    assert (source["chunk_id"], source["start_time"], source["end_time"]) == (window.pk, 271.126, 274.491)
    # The episode still cites the whole window it summarises.
    episodes = [e for e in response.json()["episodes"] if e["id"] == fact["parent_episode_id"]]
    assert all(s["start_time"] == window.start_time for e in episodes for s in e["sources"] if s.get("chunk_id") == window.pk)


def test_every_fact_of_a_transcript_cites_cue_times_of_the_file(world, django_capture_on_commit_callbacks):
    client = api_client(world.alice_key)
    with CAPTIONS.open("rb") as fh, django_capture_on_commit_callbacks(execute=False):
        client.post("/api/v1/documents", {"kb": "docs", "files": [fh]}, format="multipart")
    doc = run_inline(Document.objects.get(filename=CAPTIONS.name).pk)
    starts = {c.start for c in read_cues(CAPTIONS.read_text(encoding="utf-8"))}
    ends = {c.end for c in read_cues(CAPTIONS.read_text(encoding="utf-8"))}
    facts = Memory.objects.filter(document=doc, kind="atomic_fact").prefetch_related("source_chunks__document")
    cited = {f.text: memory_sources(f)[0] for f in facts}
    assert len(cited) > 20
    assert all(s["start_time"] in starts and s["end_time"] in ends for s in cited.values())
    narrower = [s for s in cited.values() if (s["start_time"], s["end_time"]) != (
        Chunk.objects.get(pk=s["chunk_id"]).start_time, Chunk.objects.get(pk=s["chunk_id"]).end_time)]
    assert len(narrower) > len(cited) / 2  # most cues sit inside a wider window
    left = cited["At the left we can see..."]
    assert (left["start_time"], left["end_time"]) == (15.0, 17.951)


def test_a_sentence_cut_over_two_cues_cites_both_and_a_repeated_phrase_does_not_widen_it():
    text = "At the left we can see...\nAt the right we can see the...\n...the head-snarlers\nEverything is safe."
    cues = [[0, 15.0, 17.951], [26, 18.166, 20.083], [57, 20.119, 21.962], [78, 21.999, 24.368]]
    chunk = Chunk(text=text, metadata={"kind": "cue", "cues": cues})
    assert cue_span(chunk, "At the right we can see the head-snarlers.") == (18.166, 21.962)
    assert cue_span(chunk, "[captions.en] At the left we can see...") == (15.0, 17.951)
    assert cue_span(chunk, "Nothing of it") is None
    assert cue_span(Chunk(text=text, metadata={"kind": "cue"}), "Everything is safe.") is None  # one cue: its own times
