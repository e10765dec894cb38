"""Which canonical entity a surface form names: one normalised key per name, per tenant.

"Dr. Smith", "smith's" and "SMITH" share the key "smith"; "Mel" resolves to the speaker "Melanie"
of the same chat (a nickname the data shows: a prefix of a known person's name). Keys never
cross tenants: resolution only ever looks at the tenant's own entities.
"""

import re
import unicodedata

TITLES = ("mr", "mrs", "ms", "miss", "dr", "prof", "sir", "madam", "mx")
_TITLE = re.compile(rf"^(?:{'|'.join(TITLES)})\.?\s+", re.I)
_POSSESSIVE = re.compile(r"['’]s$|(?<=s)['’]$", re.I)
_ARTICLE = re.compile(r"^the\s+", re.I)
_ZH_TITLES = ("先生", "女士", "小姐", "博士", "教授", "老师", "医生", "总")
MIN_NICKNAME = 3  # "Mel" for "Melanie"; two letters ("Al") would match too much


def entity_key(surface: str) -> str:
    """The normalised name: NFKC, case-folded, without title, article, possessive and punctuation at the ends."""
    text = unicodedata.normalize("NFKC", surface).strip(" \t\n\"'“”‘’.,;:!?()[]")
    text = _POSSESSIVE.sub("", text)
    text = _TITLE.sub("", text)
    text = _ARTICLE.sub("", text)
    for title in _ZH_TITLES:  # "张伟博士" is 张伟; a title alone stays itself
        if text.endswith(title) and len(text) > len(title) + 1:
            text = text[: -len(title)]
    return " ".join(text.casefold().split())[:200]


def nickname_of(key: str, people: dict[str, str]) -> str | None:
    """The key of the one known person whose first name `key` is a prefix of ("mel" → "melanie")."""
    if len(key) < MIN_NICKNAME or " " in key or not key.isalpha():
        return None
    matches = {k for k in people if k != key and k.split()[0].startswith(key)}
    return matches.pop() if len(matches) == 1 else None

