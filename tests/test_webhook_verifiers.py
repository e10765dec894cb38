"""A receiver checks a webhook's Loci-Signature with a client library alone (no Django settings): the Python
and the TypeScript clients accept what the server signs (webhooks/delivery.py) and refuse anything else."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loci_client import verify_signature
from webhooks.delivery import sign

TYPESCRIPT = Path(__file__).resolve().parent.parent / "clients" / "typescript"
SECRET = "whsec_test-secret"
T = 1_717_400_000
BODY = json.dumps({"event": "memory.created", "text": "Dana leads the Harbor project — ünïcode"},
                  ensure_ascii=False, separators=(",", ":")).encode()


def cases() -> dict[str, tuple[str, bytes, float, bool]]:
    """name: (header, body, now, accepted), each header made by the server's own `sign`."""
    header = sign(SECRET, T, BODY)
    return {
        "signed": (header, BODY, T + 10, True),
        "another body": (header, BODY.replace(b"Harbor", b"Harbour"), T + 10, False),
        "another secret": (sign("whsec_other", T, BODY), BODY, T, False),
        "too old": (header, BODY, T + 301, False),
        "from the future": (header, BODY, T - 301, False),
        "no v1": (f"t={T}", BODY, T, False),
        "no t": (header.split(",", 1)[1], BODY, T, False),
        "garbage": ("hello", BODY, T, False),
        "a non-ASCII v1": (f"t={T},v1=é{header[-63:]}", BODY, T, False),
    }


@pytest.mark.parametrize("name", list(cases()))
def test_the_python_client_verifies_what_the_server_signs(name):
    header, body, now, accepted = cases()[name]
    assert verify_signature(SECRET, header, body, now=now) is accepted
    assert verify_signature(SECRET, header, body.decode(), now=now) is accepted  # the body as text


def test_the_python_verifier_imports_without_django_settings(tmp_path):
    client = Path(__file__).resolve().parent.parent / "clients" / "python"
    script = ("import sys; from loci_client import verify_signature; "
              f"print(verify_signature({SECRET!r}, {sign(SECRET, T, BODY)!r}, {BODY!r}, now={T}), 'django' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(client), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0 and run.stdout.split() == ["True", "False"], run.stderr[-2000:]


def test_the_typescript_client_verifies_what_the_server_signs():
    node, npm = shutil.which("node"), shutil.which("npm")
    if not (node and npm):
        pytest.skip("Node.js and npm are not installed")
    if not (TYPESCRIPT / "node_modules" / "typescript").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=TYPESCRIPT, check=True, timeout=600,
                       capture_output=True)
    build = subprocess.run([npm, "run", "build"], cwd=TYPESCRIPT, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    vectors = [{"name": name, "header": header, "body": body.decode(), "now": now, "accepted": accepted}
               for name, (header, body, now, accepted) in cases().items()]
    run = subprocess.run([node, "--test", "test/webhooks.test.mjs"], cwd=TYPESCRIPT, capture_output=True, text=True,
                         timeout=300, env={"PATH": "/usr/bin:/bin", "LOCI_WEBHOOK_SECRET": SECRET,
                                           "LOCI_WEBHOOK_VECTORS": json.dumps(vectors)})
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout and "# skipped 0" in run.stdout


def test_the_typescript_tests_own_vector_is_the_servers():
    source = (TYPESCRIPT / "test" / "webhooks.test.mjs").read_text()
    body = re.search(r"^const BODY = '(.*)';$", source, re.M).group(1).encode()
    header = re.search(r'^const HEADER = "(.*)";$', source, re.M).group(1)
    assert header == sign("whsec_test-secret", int(re.search(r"^const T = (\d+);$", source, re.M).group(1)), body)


def test_the_servers_verifier_refuses_a_non_ascii_signature_instead_of_raising():
    """webhooks.delivery.verify_signature (the server's own, for receivers in Django) raised TypeError
    from hmac.compare_digest on a v1 with a non-ASCII character; a forged header is a False."""
    from webhooks.delivery import verify_signature as server_verify

    body, now = b'{"event": "memory.added"}', 1_700_000_000
    good = sign("whsec_test", now, body)
    assert server_verify("whsec_test", good, body, now=now)
    assert server_verify("whsec_test", f"t={now},v1=ü{good.split('v1=')[1][1:]}", body, now=now) is False
