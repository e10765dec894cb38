"""The export format: JSON Lines, one record a line, each with a `type`; a header line first.

Records carry every column of their row by its Django attribute name (`kb_id`, `document_id`,
`parent_id`…), so columns added later (scopes, metadata) travel without a format change; ids are the
source installation's, and `import` maps them. Order: knowledge bases, documents (and, when asked,
their originals), chunks (parents first), messages, memories (those without a parent first), history.
"""

import base64
import json
from datetime import date, datetime
from decimal import Decimal
from uuid import UUID

FORMAT = "loci-export"
VERSION = 1
TYPES = ("knowledge_base", "document", "original", "chunk", "message", "memory", "history")
# Columns that name this installation's state rather than the data: never exported.
SKIPPED = {"tenant_id", "original", "claim_token"}


def row_record(kind: str, obj, **extra) -> dict:
    record = {"type": kind}
    for field in obj._meta.concrete_fields:
        if field.attname not in SKIPPED:
            record[field.attname] = _plain(field.value_from_object(obj))
    record.update(extra)
    return record


def original_record(document_id: int, filename: str, data: bytes) -> dict:
    return {"type": "original", "document_id": document_id, "filename": filename,
            "content_base64": base64.b64encode(data).decode()}


def dumps(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def _plain(value):
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (UUID, Decimal)):
        return str(value)
    return value
