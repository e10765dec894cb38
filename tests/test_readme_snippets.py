"""The READMEs' client snippets run as printed on any installation: no port of their own (`make run` may
serve on another LOCI_PORT), and the TypeScript client's install step is there."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
READMES = [ROOT / "README.md", ROOT / "clients" / "python" / "README.md", ROOT / "clients" / "typescript" / "README.md"]
CODE = re.compile(r"^ *```(python|ts|typescript)\n(.*?)^ *```", re.M | re.S)


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_client_snippet_hard_codes_a_port(readme):
    snippets = CODE.findall(readme.read_text())
    assert snippets
    for language, code in snippets:
        assert not re.search(r"https?://[\w.\-]+:\d+", code), f"a {language} snippet names an address:\n{code}"


def test_the_readme_says_how_to_install_the_typescript_client():
    text = (ROOT / "README.md").read_text()
    assert "npm run build" in text and re.search(r"npm install [^`\n]*clients/typescript", text)
