"""Agentic search with a model (tests/fake_openai.py's local server; the indexes and hybrid are real):
its deadline, and its merge and worker threads."""

import json
import time

import pytest

from tests.conftest import api_client
from tests.fake_openai import fake_openai  # noqa: F401  (fixture)
from tests.test_conversation_api import ingest, search


@pytest.fixture
def alice(world, settings, committed, fake_openai):
    """Alice's client, with the sample chat extracted by the rules (the model is for the search only)."""
    client = api_client(world.alice_key)
    settings.LLM_ENABLED = False
    ingest(client, committed)
    settings.LLM_ENABLED = True
    return client


def test_a_hung_sufficiency_check_answers_with_hybrid_by_the_deadline(alice, fake_openai, settings):
    settings.LLM_TIMEOUT = 5.0
    settings.LLM_SEARCH_DEADLINE_SECONDS = 1.0
    fake_openai.queue_delay("chat", 30.0, times=5)

    started = time.monotonic()
    found = search(alice, "support group", method="agentic")
    assert time.monotonic() - started < 4.0  # 1 s for the model, the rest is hybrid
    assert found["query"]["answered_by"] == "hybrid"
    assert found["facts"] and any("sufficiency check failed" in note for note in found["query"]["notes"])


def verdict(*queries: str) -> str:
    return json.dumps({"is_sufficient": False, "reasoning": "more", "missing_information": ["x"],
                       "queries": list(queries)})
