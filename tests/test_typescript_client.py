"""The TypeScript client's generated types come from the server's current OpenAPI schema."""

import json
from pathlib import Path

from django.core.management import call_command

CLIENT = Path(__file__).resolve().parent.parent / "clients" / "typescript"


def test_the_committed_schema_is_the_servers(tmp_path):
    current = tmp_path / "openapi.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(current))
    committed = json.loads((CLIENT / "openapi.json").read_text())
    assert json.loads(current.read_text()) == committed, (
        "The API changed: run `make ts-client` and commit clients/typescript/openapi.json and src/schema.ts.")


def test_the_generated_types_name_every_schema_of_the_api():
    schema = json.loads((CLIENT / "openapi.json").read_text())
    generated = (CLIENT / "src" / "schema.ts").read_text()
    for name in schema["components"]["schemas"]:
        assert f"        {name}: {{" in generated or f"        {name}:" in generated, name
    for path in schema["paths"]:
        assert f'"{path}"' in generated, path
