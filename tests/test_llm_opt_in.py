"""LLM mode is chosen with LOCI_LLM, never inferred from a key that happens to be in the environment.

An OPENAI_API_KEY exported for another tool used to move every extraction to a paid model; the
settings are read in a fresh interpreter here, as a process would read them at start.
"""

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

REPO = Path(__file__).resolve().parents[1]
PROBE = ("import json, django; django.setup(); from django.conf import settings; "
         "print(json.dumps({'enabled': settings.LLM_ENABLED}))")


def settings_with(**env) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in {"LOCI_LLM", "LLM_DISABLED", "OPENAI_API_KEY",
                                                               "OPENAI_BASE_URL", "LLM_MODEL"}}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env={**clean, **env}, capture_output=True,
                          text=True, timeout=120)
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_key_in_the_environment_does_not_turn_llm_mode_on():
    assert settings_with(OPENAI_API_KEY="sk-exported-for-another-tool") == {"enabled": False}


def test_loci_llm_turns_it_on():
    assert settings_with(LOCI_LLM="1", OPENAI_API_KEY="sk-test") == {"enabled": True}
    assert settings_with(LOCI_LLM="1", OPENAI_BASE_URL="http://127.0.0.1:11434/v1") == {"enabled": True}


def test_loci_llm_without_an_endpoint_is_a_configuration_error():
    said = settings_with(LOCI_LLM="1")
    assert "ImproperlyConfigured" in said["error"] and "OPENAI_BASE_URL" in said["error"]


def _up_banner(port: int) -> str:
    out = io.StringIO()
    # A port already held stops `up` right after its banner, before it starts anything.
    with pytest.raises(CommandError):
        call_command("up", "--host", "127.0.0.1", "--port", str(port), stdout=out)
    return out.getvalue()


@pytest.fixture
def held_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_up_names_the_model_and_endpoint_it_uses(settings, held_port):
    settings.LLM_ENABLED = True
    settings.LLM_MODEL = "qwen2.5:7b"
    settings.OPENAI_BASE_URL = "http://127.0.0.1:11434/v1"

    assert "LLM: qwen2.5:7b at http://127.0.0.1:11434/v1" in _up_banner(held_port)


def test_up_says_when_a_key_is_set_but_llm_mode_is_off(settings, held_port):
    settings.LLM_ENABLED = False
    settings.OPENAI_API_KEY = "sk-exported"

    banner = _up_banner(held_port)
    assert "LLM: off" in banner and "LOCI_LLM" in banner
