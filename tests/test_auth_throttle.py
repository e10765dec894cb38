"""Password and API-key guessing is throttled: past the limit even the right credential is refused until
the window ends, with a message (sign-in) or 429 + Retry-After (API) that says when to try again."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.conftest import api_client

ROOT = Path(__file__).resolve().parents[1]
WRONG = "didn\u2019t match".encode()
LOCKED = b"Too many failed sign-ins"


@pytest.fixture
def limits(settings):
    settings.LOCI_SIGNIN_FAILURES_PER_USER = 5
    settings.LOCI_SIGNIN_FAILURES_PER_IP = 8
    settings.LOCI_API_KEY_FAILURES_PER_IP = 3
    settings.LOCI_AUTH_THROTTLE_WINDOW = 900
    return settings


def sign_in(username, password, address="127.0.0.1", path="/login/"):
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password})


def test_the_right_password_is_refused_once_the_account_is_locked(world, limits):
    for _ in range(5):
        response = sign_in("alice", "wrong")
        assert response.status_code == 200 and WRONG in response.content
    response = sign_in("alice", "alice-pw-123")
    assert response.status_code == 200, "signed in while locked out"
    assert LOCKED in response.content and b"Try again in 15 minutes" in response.content
    # From another address too: the lock is on the account.
    assert LOCKED in sign_in("alice", "alice-pw-123", address="10.9.9.9").content
    # Another account is not affected.
    assert sign_in("bob", "bob-pw-123").status_code == 302


def test_the_lock_ends_with_its_window(world, limits, clock):
    for _ in range(5):
        sign_in("alice", "wrong")
    assert LOCKED in sign_in("alice", "alice-pw-123").content
    clock.advance(899)
    assert LOCKED in sign_in("alice", "alice-pw-123").content
    clock.advance(2)
    assert sign_in("alice", "alice-pw-123").status_code == 302


def test_a_success_resets_the_accounts_count(world, limits):
    for address in ("10.4.4.1", "10.4.4.2"):  # the address's own count is not reset (see the next test)
        for _ in range(4):
            sign_in("alice", "wrong", address=address)
        assert sign_in("alice", "alice-pw-123", address=address).status_code == 302


def test_guessing_many_usernames_from_one_address_locks_the_address(world, limits):
    for i in range(8):
        sign_in(f"user{i}", "guess", address="10.1.1.1")
    assert LOCKED in sign_in("alice", "alice-pw-123", address="10.1.1.1").content
    assert sign_in("alice", "alice-pw-123", address="10.2.2.2").status_code == 302


def test_the_admin_sign_in_is_throttled_too(world, limits):
    get_user_model().objects.create_user("root", password="root-pw-123", is_staff=True, is_superuser=True)
    for _ in range(5):
        sign_in("root", "wrong", path="/admin/login/")
    response = sign_in("root", "root-pw-123", path="/admin/login/")
    assert response.status_code == 200 and LOCKED in response.content


def test_api_key_guesses_get_429_with_retry_after_and_then_the_right_key_is_refused(world, limits):
    for _ in range(3):
        assert api_client("loci_abc_guess").get("/api/v1/tenants").status_code == 401
    client = api_client(world.alice_key)
    response = client.get("/api/v1/tenants")
    assert response.status_code == 429
    assert 890 <= int(response["Retry-After"]) <= 900
    assert "Too many failed API-key attempts" in response.json()["error"]
    other = api_client(world.alice_key)
    other.defaults["REMOTE_ADDR"] = "10.3.3.3"
    assert other.get("/api/v1/tenants").status_code == 200


def test_x_forwarded_for_is_ignored_unless_proxies_are_trusted(world, limits):
    for i in range(3):
        client = api_client("loci_abc_guess")
        assert client.get("/api/v1/tenants", HTTP_X_FORWARDED_FOR=f"10.0.0.{i}").status_code == 401
    assert api_client(world.alice_key).get("/api/v1/tenants", HTTP_X_FORWARDED_FOR="10.0.0.99").status_code == 429
    limits.LOCI_TRUSTED_PROXIES = 1
    assert api_client(world.alice_key).get("/api/v1/tenants", HTTP_X_FORWARDED_FOR="10.0.0.99").status_code == 200


def test_the_default_cache_shares_counts_between_processes(tmp_path, settings):
    """What another web process records on the default (file) cache locks this one out too."""
    settings.LOCI_SIGNIN_FAILURES_PER_USER = 5
    code = ("import django; django.setup()\n"
            "from tenants import throttle\n"
            "for _ in range(5): throttle.record_failure(throttle.sign_in_counters('alice', None))\n")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "loci.settings", "LOCI_VAR_DIR": str(tmp_path),
           "LOCI_SIGNIN_FAILURES_PER_USER": "5", "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                                   "LOCATION": str(tmp_path / "cache")}}
    from tenants import throttle

    assert throttle.seconds_locked(throttle.sign_in_counters("alice", None)) > 800


def test_health_warns_of_forwarded_requests_from_an_untrusted_proxy(client, db, settings):
    from django.core.cache import cache

    from tenants.forwarded import NOTICE_KEY

    cache.delete(NOTICE_KEY)
    settings.LOCI_TRUSTED_PROXIES = 0
    assert "proxy" not in client.get("/healthz").json()
    client.get("/api/v1/tenants", HTTP_X_FORWARDED_FOR="203.0.113.7", REMOTE_ADDR="10.0.0.2")
    notice = client.get("/healthz").json()["proxy"]
    assert "10.0.0.2" in notice and "LOCI_TRUSTED_PROXIES" in notice

    settings.LOCI_TRUSTED_PROXIES = 1  # the operator named the proxy: nothing to warn of
    assert "proxy" not in client.get("/healthz").json()
    cache.delete(NOTICE_KEY)
