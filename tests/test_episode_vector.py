"""EPISODE_VECTOR "facts": an episode's vector is the mean of its facts' vectors, not its narrative's."""

import numpy as np
import pytest

from memory.models import Memory
from retrieval.backends import vector_index
from retrieval.backends.base import IndexFilter
from retrieval.embeddings import embedder
from retrieval.projection import row_for_memory
from tests.conftest import api_client
from tests.test_conversation_api import ingest

pytestmark = pytest.mark.usefixtures("lite_vector_settings")


def episode_and_facts_vector(world):
    episode = Memory.objects.get(tenant=world.acme, kind=Memory.Kind.EPISODE)
    facts = Memory.objects.filter(parent=episode, kind=Memory.Kind.ATOMIC_FACT)
    assert facts.count() >= 2
    mean = embedder().embed_documents([row_for_memory(f).text for f in facts]).mean(axis=0)
    return episode, (mean / np.linalg.norm(mean)).tolist()


def nearest_episode(world, episode, vector):
    flt = IndexFilter(tenant_id=world.acme.pk, kb_ids=(episode.kb_id,), kinds=("episode",))
    return vector_index().search(vector, flt, 1)[0]


def test_with_facts_an_episode_is_found_at_its_facts_mean(world, committed, settings):
    settings.EPISODE_VECTOR = "facts"
    ingest(api_client(world.alice_key), committed)
    episode, mean = episode_and_facts_vector(world)
    hit = nearest_episode(world, episode, mean)
    assert hit.id == f"memory:{episode.pk}" and hit.score == pytest.approx(1.0, abs=1e-4)


def test_by_default_an_episode_is_its_narrative(world, committed, settings):
    assert settings.EPISODE_VECTOR == "text"
    ingest(api_client(world.alice_key), committed)
    episode, mean = episode_and_facts_vector(world)
    assert nearest_episode(world, episode, mean).score < 0.999
