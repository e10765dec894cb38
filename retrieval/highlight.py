"""Mark a query's terms in result text, safely: every character of the text is HTML-escaped."""

import re
from functools import lru_cache

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from retrieval.text import tokenize

# Han, kana and hangul: scripts written without spaces, so their terms are matched anywhere in a run.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# Light English inflection, so "memo" also marks "memos" (BM25 matches whole terms only).
_SUFFIXES = r"(?:s|es|ed|ing)?"


def query_terms(query: str) -> list[str]:
    """The query's terms as BM25 sees them (jieba for Chinese, stop words dropped), longest first."""
    # One-letter terms ("b" from "<b>") would mark stray letters everywhere.
    terms = {t for t in tokenize(query) if len(t) >= 2}
    return sorted(terms, key=lambda t: (-len(t), t))


@lru_cache(maxsize=256)
def _pattern(terms: tuple[str, ...]) -> re.Pattern | None:
    if not terms:
        return None
    parts = []
    for term in terms:
        if _CJK.search(term):
            parts.append(re.escape(term))
        else:
            parts.append(rf"(?<!\w){re.escape(term)}{_SUFFIXES}(?!\w)")
    return re.compile("|".join(parts), re.IGNORECASE)


def highlight(text: str, terms: list[str]) -> SafeString:
    """`text` escaped, with each occurrence of a term wrapped in <mark>."""
    pattern = _pattern(tuple(terms))
    if pattern is None:
        return mark_safe(escape(text))
    spans: list[list[int]] = []
    for match in pattern.finditer(text):
        if spans and match.start() <= spans[-1][1]:
            # Adjacent terms ("尤金" + "袋鼠") read as one phrase, so they share one mark.
            spans[-1][1] = match.end()
        else:
            spans.append([match.start(), match.end()])
    out, last = [], 0
    for start, end in spans:
        out.append(escape(text[last:start]))
        out.append(f"<mark>{escape(text[start:end])}</mark>")
        last = end
    out.append(escape(text[last:]))
    return mark_safe("".join(out))
