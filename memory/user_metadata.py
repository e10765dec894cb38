"""User metadata: the small map of string or number values a caller attaches to a document, a message
batch or a memory (tags, category, source, chapter…), and the rules it must follow.

Keys are plain identifiers, so an index backend may use one inside a field path without quoting it;
values are strings of at most MAX_STRING characters or finite numbers (never booleans, lists or
objects). The same rules hold at the API (a 400 naming the key) and in every index backend.
"""

import json
import math
import re

KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")
MAX_KEYS = 16
MAX_STRING = 200


class MetadataError(ValueError):
    """Metadata the caller must fix (HTTP 400), with a readable reason."""


def check_key(key, where: str = "metadata") -> str:
    if not isinstance(key, str) or not KEY_RE.match(key):
        raise MetadataError(f"'{where}' keys must start with a letter and hold only letters, digits and '_' "
                            f"(at most 40 characters); {str(key)[:60]!r} does not.")
    return key


def check_value(value, where: str = "metadata"):
    """A string of at most MAX_STRING characters or a finite number (an int stays an int)."""
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            raise MetadataError(f"'{where}' strings are at most {MAX_STRING} characters.")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetadataError(f"'{where}' values must be strings or numbers, not {type(value).__name__}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise MetadataError(f"'{where}' numbers must be finite.")
    return value


def clean_user_metadata(value, where: str = "metadata") -> dict:
    """The caller's metadata as a checked dict ({} for None); a JSON object given as text is read too
    (a multipart upload sends it as a form field)."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise MetadataError(f"'{where}' must be a JSON object.") from None
    if not isinstance(value, dict):
        raise MetadataError(f"'{where}' must be an object of string or number values.")
    if len(value) > MAX_KEYS:
        raise MetadataError(f"'{where}' holds at most {MAX_KEYS} keys.")
    return {check_key(k, where): check_value(v, where) for k, v in value.items()}
