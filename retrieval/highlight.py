"""Mark a query's terms in result text, safely: every character of the text is HTML-escaped."""

import re
from functools import lru_cache

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

# Han, kana and hangul: scripts written without spaces, segmented with jieba instead of \w+ runs.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_WORDS = re.compile(r"\w+")
# Words too common to be worth a mark; the keyword index ignores them when scoring as well.
_STOP_WORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his how i in is it its of on or she "
    "that the their them they this to was we were what when where which who why will with you your".split()
)
# Light English inflection, so "memo" also marks "memos" (the index stems or matches whole words).
_SUFFIXES = r"(?:s|es|ed|ing)?"


def query_terms(query: str) -> list[str]:
    """The query's searchable terms, longest first: Latin words and jieba tokens for CJK text."""
    terms = set()
    for run in _WORDS.findall(query.lower()):
        if _CJK.search(run):
            terms.update(_cjk_terms(run))
        elif len(run) >= 2 and run not in _STOP_WORDS:
            terms.add(run)
    return sorted(terms, key=lambda t: (-len(t), t))


def _cjk_terms(run: str) -> set[str]:
    import jieba  # loads its dictionary on first use; only Chinese queries pay for it

    tokens = {t.strip() for t in jieba.cut_for_search(run) if t.strip()}
    # Single characters mark nearly everything; keep them only when the query is one character.
    longer = {t for t in tokens if len(t) >= 2}
    return longer or tokens


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
