"""Request rates per API key and per signed-in user: past the limit 429 with Retry-After, others unaffected."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from common.env import env_rate
from tests.conftest import api_client

KBS = "/api/v1/knowledge-bases"
SEARCH = "/api/v1/memories/search"

pytestmark = pytest.mark.usefixtures("api_schema_check")  # the 429s match the error shape of the schema


@pytest.fixture
def rates(settings):
    def set_rates(user=None, search=None):
        settings.LOCI_RATE_LIMITS = {"user": user, "search": search}
    return set_rates


def test_a_key_past_its_rate_gets_429_with_retry_after_and_other_callers_do_not(world, rates):
    rates(user="3/min")
    alice = api_client(world.alice_key)
    assert [alice.get(KBS).status_code for _ in range(3)] == [200, 200, 200]
    refused = alice.get(KBS)
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "this API key" in refused.json()["error"] and "LOCI_RATE_LIMIT_USER" in refused.json()["error"]
    # Another key of the same tenant, another tenant's key and a signed-in user each have their own allowance.
    assert api_client(world.acme_ro_key).get(KBS).status_code == 200
    assert api_client(world.charlie_key).get(KBS).status_code == 200
    assert api_client(user=world.alice).get(KBS).status_code == 200


def test_a_signed_in_user_is_limited_per_user_across_sessions(world, rates):
    rates(user="2/min")
    assert api_client(user=world.bob).get(KBS).status_code == 200
    assert api_client(user=world.bob).get(KBS).status_code == 200  # a second session, same user
    refused = api_client(user=world.bob).get(KBS)
    assert refused.status_code == 429 and "your account" in refused.json()["error"] and refused["Retry-After"]
    assert api_client(user=world.alice).get(KBS).status_code == 200


def test_searches_have_their_own_limit_which_leaves_other_endpoints_alone(world, rates):
    rates(user="100/min", search="2/min")
    alice = api_client(world.alice_key)
    # Every search request counts, a bad one too: the limit is checked before the body is read.
    assert [alice.post(SEARCH, {"query": ""}, format="json").status_code for _ in range(2)] == [400, 400]
    refused = alice.post(SEARCH, {"query": "anything"}, format="json")
    assert refused.status_code == 429 and "LOCI_RATE_LIMIT_SEARCH" in refused.json()["error"]
    assert int(refused["Retry-After"]) >= 1
    assert alice.get(KBS).status_code == 200
    assert api_client(world.acme_ro_key).post(SEARCH, {"query": ""}, format="json").status_code == 400


def test_the_limit_lifts_when_its_window_has_passed(world, rates, clock):
    rates(user="2/min")
    alice = api_client(world.alice_key)
    assert [alice.get(KBS).status_code for _ in range(3)] == [200, 200, 429]
    clock.advance(59)
    assert alice.get(KBS).status_code == 429
    clock.advance(2)
    assert alice.get(KBS).status_code == 200


def test_no_limit_when_the_rate_is_off(world, rates):
    rates(user=None, search=None)
    alice = api_client(world.alice_key)
    assert {alice.get(KBS).status_code for _ in range(30)} == {200}


@pytest.mark.parametrize("raw, rate", [("600/min", "600/min"), (" 5 / Second ", "5/second"), ("100/hours", "100/hour"),
                                       ("off", None), ("0", None), ("", "600/min")])
def test_rates_are_read_from_the_environment(monkeypatch, raw, rate):
    monkeypatch.setenv("LOCI_RATE_LIMIT_USER", raw)
    assert env_rate("LOCI_RATE_LIMIT_USER", "600/min") == rate


@pytest.mark.parametrize("raw", ["600", "ten/min", "600/week", "-1/min", "0/min"])
def test_a_bad_rate_stops_start_up_with_a_clear_reason(monkeypatch, raw):
    monkeypatch.setenv("LOCI_RATE_LIMIT_USER", raw)
    with pytest.raises(ImproperlyConfigured, match="LOCI_RATE_LIMIT_USER must be a rate like 600/min"):
        env_rate("LOCI_RATE_LIMIT_USER", "600/min")


def test_a_key_past_its_search_cpu_allowance_gets_429_until_the_minute_has_passed(world, rates, settings, clock):
    """LOCI_SEARCH_CPU_PER_MINUTE counts what searches cost (query.cpu_ms), not how many there are."""
    rates(user=None, search=None)
    settings.LOCI_SEARCH_CPU_PER_MINUTE = 1e-6  # the first search spends it
    alice = api_client(world.alice_key)
    first = alice.post(SEARCH, {"query": "harbour tide", "method": "keyword"}, format="json")
    assert first.status_code == 200 and first.json()["query"]["cpu_ms"] > 0
    refused = alice.post(SEARCH, {"query": "harbour tide", "method": "keyword"}, format="json")
    assert refused.status_code == 429 and "LOCI_SEARCH_CPU_PER_MINUTE" in refused.json()["error"]
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert alice.get(KBS).status_code == 200  # other endpoints are not searches
    assert api_client(world.acme_ro_key).post(SEARCH, {"query": "harbour tide", "method": "keyword"},
                                              format="json").status_code == 200  # another key: its own
    clock.advance(61)
    assert alice.post(SEARCH, {"query": "harbour tide", "method": "keyword"}, format="json").status_code == 200


def test_the_search_cpu_allowance_is_generous_for_ordinary_searches(world, rates):
    rates(user=None, search=None)
    alice = api_client(world.alice_key)
    codes = [alice.post(SEARCH, {"query": f"harbour tide {i}", "method": "hybrid"}, format="json").status_code
             for i in range(20)]
    assert codes == [200] * 20
