"""One calibrated relevance for every result item, the floor under it, and the language check.

Every method scores in its own currency: hybrid's facts carry α·fact + (1−α)·episode, its chunks
and episodes a logistic fusion of cosine and BM25, keyword raw BM25, vector raw cosine. None of
those can be compared with another, so none can order a list that mixes them. `calibrated` maps
each to P(the item holds the answer), by Platt scaling (a one-feature logistic regression) fitted
per signal on labelled questions: `python -m bench.fit_relevance` (bench/RESULTS.md, "One
relevance"). The maps are monotone, so each method's own order inside a kind is kept: mRAG's
facts and episodes share one map, since the expander already ranks them against each other.

Cross-language: a query and a text in different scripts share no BM25 term, and e5's cosine of a
translation is lower than that of the same words (bench/RESULTS.md measures the gap), so an
English passage loses to any Chinese one for a Chinese question. An item in the other script has
its cosine raised by SEARCH_CROSS_LANGUAGE_COSINE_SHIFT before any scoring: dense evidence alone
then reaches what dense + BM25 evidence reaches in one language.
"""

import math
import re

from django.conf import settings

from retrieval import fitted

# Han, kana and hangul: the scripts BM25 over jieba tokens cannot match against Latin words.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LETTER = re.compile(r"[^\W\d_]")
_LETTER_RUN = re.compile(r"[^\W\d_]+")
# A text is CJK when at least this share of its letters is, Latin when at most 1 − it is, else mixed:
# a Chinese line that names people in English ("第二个种是P. tuckeri，由Frank Paiva与William M. Tucker
# 发现", CMRC has a few) is mixed — BM25 matches it from either language, so it is not shifted (with a
# 0.3 cut such lines counted as Latin and were raised for every Chinese question).
CJK_SHARE = fitted.CJK_SHARE.value  # retrieval/fitted.py: fitted on, date, command
PROBE_CHARS = 400  # the language of a text is read from its start; a long chunk does not change script


def cjk_share(text: str) -> float:
    """Share of the letters of `text` (its first PROBE_CHARS characters) that are CJK; 0 with no letters."""
    probe = text[:PROBE_CHARS]
    # Hybrid asks this of every fact it scores (~600 a search): ASCII text has no CJK letter, and
    # counting runs and substitutions builds no list of one-character strings (2-3x faster).
    if probe.isascii():
        return 0.0
    letters = sum(map(len, _LETTER_RUN.findall(probe)))
    return _CJK.subn("", probe)[1] / letters if letters else 0.0


def script(text: str) -> str:
    """A query's script: 'cjk' (mostly CJK letters), 'latin' (letters, none CJK) or 'mixed'.

    Only a query wholly in one script is across languages from a text: "MIT OpenCourseWare指什么？"
    (15 % CJK) is mixed, and its answer is a mixed line of a Chinese passage, which raising every
    Chinese item for it would push down (CMRC: one question lost when it counted as Latin)."""
    share = cjk_share(text)
    if share >= CJK_SHARE:
        return "cjk"
    has_letters = _LETTER.search(text[:PROBE_CHARS]) is not None
    return "latin" if share == 0.0 and has_letters else "mixed"


def logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def platt(x: float, weight: float, bias: float) -> float:
    z = weight * x + bias
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def calibrated(signal: str, value: float) -> float:
    """P(relevant) from one signal: 'mrag' (a fact's final or an episode's fused score), 'chunk' (a
    chunk's fused score), 'bm25' (raw BM25) or 'cosine' (raw cosine), with the fitted settings."""
    weight, bias = settings.SEARCH_RELEVANCE[signal]
    return platt(logit(value) if signal in ("mrag", "chunk") else value, weight, bias)


CROSSING = (("cjk", "latin"), ("latin", "cjk"))  # (query script, item script) across languages


def crosses(query_script: str, item_script: str) -> bool:
    """Whether an item of `item_script` (script() of its text) is across languages from the query."""
    return (query_script, item_script) in CROSSING


def rescored(hybrid: float, score: float, mapping) -> float:
    """A rescoring stage's calibrated relevance: σ(a · logit(hybrid's relevance) + b · score + c), with
    (a, b, c) its fitted map (the late-interaction and the multilingual stages)."""
    a, b, c = mapping
    return platt(a * logit(hybrid) + b * score, 1.0, c)


def cosine_shift(query_script: str, text: str) -> float:
    """What is added to an item's cosine: the cross-language shift when BM25 cannot match it.

    For a CJK query, an item with no CJK letter at all; for a Latin query, a CJK item. A Chinese
    line quoting English names ("[MIT OpenCourseWare] 这个计划由William and Flora Hewlett Foundation…")
    is not raised for a Chinese question: its Chinese words match, and raised it led CMRC's vector
    results (R@1 0.985 → 0.929 when every item under a 0.2 CJK share counted as Latin)."""
    return settings.SEARCH_CROSS_LANGUAGE_COSINE_SHIFT if crosses(query_script, script(text)) else 0.0
