"""Entities end to end, on real data: a LoCoMo conversation excerpt and documents of ../shared/data/docs.

Extraction and resolution at ingestion, the entity API with its tenant and KB scope, every delete
path leaving no mention or orphan, reconcile and reindex of the projection, and the entity channel
of hybrid search with its "entity" score.
"""

import io
import json
import os
from datetime import datetime, timedelta, timezone
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from entities.actions import link_memories
from entities.models import Entity, EntityAlias, EntityMention
from entities.projection import reconcile_entities
from ingest.actions import ingest_document
from extraction.llm import episode_from_reply
from extraction.base import ExtractionUnit, Passage
from memory.models import Memory
from ingest.tasks import run_inline
from memory.actions import delete_document
from tenants.access import permitted_scope
from tests.conftest import api_client

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "api_schema_check")

DATA = Path(os.environ.get("LOCI_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
LOCOMO = DATA / "locomo" / "locomo10_dev.json"
DOCS = DATA / "docs" / "unstructured"


def locomo_turns(n=24):
    """The first `n` turns of LoCoMo conversation 0, session 1 (Caroline and Melanie)."""
    conv = json.loads(LOCOMO.read_text())[0]["conversation"]
    start = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    return [{"message_id": t["dia_id"], "sender_id": t["speaker"].lower(), "sender_name": t["speaker"],
             "content": t["text"], "timestamp": (start + timedelta(seconds=30 * i)).isoformat()}
            for i, t in enumerate(conv["session_1"][:n])]


def chat(client, committed, turns, user="u1", session="s1"):
    body = {"user_id": user, "session_id": session, "messages": turns}
    assert committed(client.post, "/api/v1/memories", body, format="json").status_code == 200
    flushed = committed(client.post, "/api/v1/memories/flush", {"user_id": user, "session_id": session},
                        format="json")
    assert flushed.status_code == 200, flushed.content


def ingest_file(scope, kb, path: Path):
    with transaction.atomic():
        upload = ingest_document(scope, kb, io.BytesIO(path.read_bytes()), path.name)
    document = run_inline(upload.document.pk)
    assert document.status == "ready", document.error
    return document


def entity(tenant, name):
    return Entity.objects.get(tenant=tenant, key=name.casefold())


def test_a_chat_links_its_speakers_their_nicknames_and_the_names_they_say(world, committed):
    alice = api_client(world.alice_key)
    chat(alice, committed, locomo_turns())
    caroline, melanie = entity(world.acme, "Caroline"), entity(world.acme, "Melanie")
    assert caroline.type == melanie.type == "person"
    # A nickname is a prefix of the chat's speaker: "Mel" resolves to Melanie, kept as an alias.
    note = Memory.objects.create(tenant=world.acme, kb=world.docs, kind="episode", text="Mel met Jon at Mel's place.",
                                 metadata={"participants": ["Caroline", "Melanie"]})
    link_memories([note])
    assert "Mel" in set(melanie.aliases.values_list("surface", flat=True))
    assert not Entity.objects.filter(tenant=world.acme, key="mel").exists()
    assert not Entity.objects.filter(tenant=world.acme, key="did caroline").exists()  # "Did Caroline hear …?"
    assert Entity.objects.filter(tenant=world.acme, key="lgbtq").exists()
    # Capitalised for grammar at a sentence's start, never entities.
    for word in ("wow", "what's", "that's", "hey", "thanks", "the", "painting's"):
        assert not Entity.objects.filter(tenant=world.acme, key=word).exists(), word
    facts = Memory.objects.filter(tenant=world.acme, kind="atomic_fact")
    assert EntityMention.objects.filter(entity=caroline, memory__in=facts).count() >= 3

    listed = alice.get("/api/v1/entities", {"q": "mel"}).json()
    assert [e["name"] for e in listed["results"]] == ["Melanie"]
    people = alice.get("/api/v1/entities", {"type": "person"}).json()["results"]
    assert {"Caroline", "Melanie"} <= {e["name"] for e in people}
    assert all(e["modes"] == ["deterministic"] for e in people)
    assert alice.get("/api/v1/entities", {"type": "nobody"}).status_code == 400

    detail = alice.get(f"/api/v1/entities/{melanie.pk}").json()
    assert detail["mention_count"] == len(detail["memories"]) > 0
    assert {"Mel", "Melanie"} <= set(detail["aliases"])
    assert all(m["sources"] and m["sources"][0]["type"] == "message" for m in detail["memories"]
               if m["id"] != str(note.pk))


def test_documents_name_people_places_and_typed_values(world):
    scope = permitted_scope(world.alice, write=True)
    ingest_file(scope, world.docs, DOCS / "book-war-and-peace-1p.txt")
    ingest_file(scope, world.docs, DOCS / "zh_from_history" / "zho_md_partition.md")
    names = dict(Entity.objects.filter(tenant=world.acme).values_list("key", "type"))
    assert "anna pavlovna" in names or "anna pavlovna scherer" in names
    assert names.get("st. petersburg") == "place" or "petersburg" in names
    assert names.get("genoa") in ("place", "other") and "lucca" in names
    dates = dict(Entity.objects.filter(tenant=world.acme, type="date").values_list("key", "name"))
    assert "2021-02-06" in dates and dates["2021-02-06"] == "2021年2月6日"  # a Chinese date, typed

    alice = api_client(world.alice_key)
    kuragin = Entity.objects.filter(tenant=world.acme, key__contains="kuragin").first()
    assert kuragin is not None
    detail = alice.get(f"/api/v1/entities/{kuragin.pk}").json()
    assert detail["chunks"], "the document chunk that names him"
    assert all("Kuragin" in c["text"] and c["source"]["document_name"] == "book-war-and-peace-1p.txt"
               for c in detail["chunks"])
    assert all(s["type"] == "chunk" for m in detail["memories"] for s in m["sources"])


def test_entities_never_cross_tenants_and_follow_the_readable_kbs(world, committed):
    alice, charlie = api_client(world.alice_key), api_client(world.charlie_key)
    chat(alice, committed, locomo_turns(12))
    chat(charlie, committed, locomo_turns(12))
    ours, theirs = entity(world.acme, "Caroline"), entity(world.globex, "Caroline")
    assert ours.pk != theirs.pk
    assert set(EntityMention.objects.filter(entity=ours).values_list("memory__tenant_id", flat=True)) == {world.acme.pk}
    assert charlie.get(f"/api/v1/entities/{ours.pk}").status_code == 404
    assert {e["id"] for e in charlie.get("/api/v1/entities").json()["results"]} <= set(
        Entity.objects.filter(tenant=world.globex).values_list("pk", flat=True))
    # Named only in memories of a KB the caller may not read: not shown, not counted.
    Memory.objects.filter(tenant=world.acme).update(kb=world.notes)
    EntityMention.objects.filter(tenant=world.acme).update(kb=world.notes)
    from tenants.models import ApiKey

    _, docs_only = ApiKey.issue(world.acme, "docs-only", knowledge_bases=[world.docs])
    limited = api_client(docs_only)
    assert limited.get(f"/api/v1/entities/{ours.pk}").status_code == 404
    assert limited.get("/api/v1/entities").json()["results"] == []


def test_every_delete_leaves_no_mention_and_no_orphan_entity(world, committed):
    alice = api_client(world.alice_key)
    chat(alice, committed, locomo_turns(12), user="u1")
    scope = permitted_scope(world.alice, write=True)
    document = ingest_file(scope, world.docs, DOCS / "book-war-and-peace-1p.txt")
    assert Entity.objects.filter(tenant=world.acme, key__contains="kuragin").exists()

    committed(delete_document, scope, document)
    assert not EntityMention.objects.filter(memory__document_id=document.pk).exists()
    assert not Entity.objects.filter(tenant=world.acme, key__contains="kuragin").exists()
    assert Entity.objects.filter(tenant=world.acme, key="caroline").exists()  # still named by the chat

    one = Memory.objects.filter(tenant=world.acme, kind="atomic_fact", entity_mentions__isnull=False).first()
    assert committed(alice.delete, f"/api/v1/memories/{one.pk}").status_code == 200
    assert not EntityMention.objects.filter(memory_id=one.pk).exists()

    assert committed(alice.delete, "/api/v1/memories?user_id=u1").status_code == 200
    assert not EntityMention.objects.filter(tenant=world.acme).exists()
    assert not Entity.objects.filter(tenant=world.acme).exists()
    assert not EntityAlias.objects.filter(tenant=world.acme).exists()
    assert reconcile_entities(world.acme) == {"tenant": "acme", "missing": 0, "stale": 0, "orphans": 0,
                                              "repaired": False}


def test_reconcile_finds_drift_and_reindex_rebuilds_the_projection(world, committed):
    alice = api_client(world.alice_key)
    chat(alice, committed, locomo_turns())
    assert reconcile_entities(world.acme)["missing"] == 0
    before = set(EntityMention.objects.values_list("memory_id", "entity__key"))
    EntityMention.objects.filter(entity__key="caroline").delete()
    Entity.objects.create(tenant=world.acme, type="other", key="nobody", name="Nobody")

    with pytest.raises(CommandError):
        call_command("reconcile", "--tenant", "acme", stdout=StringIO())
    report = reconcile_entities(world.acme)
    assert report["missing"] > 0 and report["orphans"] == 2  # Caroline, unnamed now, and Nobody

    call_command("reindex", "--tenant", "acme", stdout=StringIO(), stderr=StringIO())
    assert set(EntityMention.objects.values_list("memory_id", "entity__key")) == before
    assert not Entity.objects.filter(key="nobody").exists()
    out = StringIO()
    call_command("reconcile", "--tenant", "acme", stdout=out)
    assert json.loads(out.getvalue().splitlines()[0])["entities"]["missing"] == 0


def test_an_edited_memory_is_linked_again(world, committed):
    alice = api_client(world.alice_key)
    chat(alice, committed, locomo_turns(12))
    fact = Memory.objects.filter(tenant=world.acme, kind="atomic_fact").first()
    from memory.curation import update_memory_text

    committed(update_memory_text, fact, "Caroline visited Stockholm with Dr. Jonas Berg.", actor="alice")
    keys = set(EntityMention.objects.filter(memory=fact).values_list("entity__key", flat=True))
    assert {"stockholm", "jonas berg"} <= keys
    assert Entity.objects.get(tenant=world.acme, key="jonas berg").type == "person"  # "Dr." says so


def test_hybrid_search_pulls_in_and_scores_the_facts_naming_the_query_s_entity(world, committed):
    alice = api_client(world.alice_key)
    chat(alice, committed, locomo_turns())
    response = alice.post("/api/v1/memories/search", {"query": "When did Caroline go to the LGBTQ support group?",
                                                      "filters": {"user_id": "u1"}, "method": "hybrid"},
                          format="json")
    assert response.status_code == 200, response.content
    facts = response.json()["facts"]
    naming = [f for f in facts if "LGBTQ" in f["atomic_fact"]]
    assert naming and all(f["scores"]["entity"] > 0 for f in naming)
    assert all(f["scores"]["entity"] == 0 for f in facts if "LGBTQ" not in f["atomic_fact"]
               and not EntityMention.objects.filter(memory_id=f["id"], entity__key="lgbtq").exists())
    # The same question from another tenant finds nothing of acme's, entities included.
    other = api_client(world.charlie_key).post("/api/v1/memories/search", {"query": "LGBTQ support group Caroline"},
                                               format="json")
    assert other.status_code == 200 and other.json()["facts"] == []


def test_the_llm_s_entities_are_kept_and_linked_and_their_absence_is_tolerated(world, committed):
    unit = ExtractionUnit("", [Passage("D1:1", "I went to Sweden with Ana.", "Caroline")])
    reply = {"summary": "Caroline went to Sweden.", "facts": [
        {"text": "Caroline went to Sweden with Ana.", "sources": [1],
         "entities": [{"name": "Sweden", "type": "place"}, {"name": "Ana", "type": "person"}, {"bad": 1}, "Caroline"]},
        {"text": "Caroline likes fika.", "sources": [1]}]}
    first, second = episode_from_reply(reply, unit, unit.passages).facts
    assert first.entities == [{"name": "Sweden", "type": "place"}, {"name": "Ana", "type": "person"},
                              {"name": "Caroline", "type": "other"}]
    assert second.entities == []
    memory = Memory.objects.create(tenant=world.acme, kb=world.docs, kind="atomic_fact", text=first.text,
                                   metadata={"entities": first.entities}, extraction_mode="llm")
    link_memories([memory])
    modes = dict(EntityMention.objects.filter(memory=memory).values_list("entity__key", "mode"))
    assert modes["ana"] in ("llm", "deterministic") and modes["sweden"] in ("llm", "deterministic")
    assert Entity.objects.get(tenant=world.acme, key="sweden").type == "place"
