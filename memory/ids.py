"""Fixed memory ids: the same source (document and ordinal, conversation segment and index …) always
names the same memory, so a re-run overwrites it instead of adding a duplicate."""

import uuid

# Never change it: every stored memory's id was derived from it.
_MEMORY_NAMESPACE = uuid.UUID("6f1c1d7e-8a51-4d0c-9a57-1c0c5e0b7a11")


def memory_uuid(*parts) -> uuid.UUID:
    """The id of the memory the parts name (a uuid5 of their ':'-joined text)."""
    return uuid.uuid5(_MEMORY_NAMESPACE, ":".join(str(p) for p in parts))
