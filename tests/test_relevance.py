"""The language check and the calibrated maps of retrieval.relevance (pure functions)."""

from retrieval.relevance import calibrated, cosine_shift, script


def test_scripts_are_told_apart_by_their_share_of_cjk_letters():
    assert script("伊万·罗伯茨出生在哪里？") == "cjk"
    assert script("罗伯茨1966年出生于威尔士班戈（Wales），是一名足球运动员。") == "cjk"
    assert script("伊万·罗伯茨（Iwan Roberts）出生于班戈。") == "mixed"  # BM25 matches its English name
    assert script("Where was Iwan Roberts born?") == "latin"
    assert script("第二个种是P. tuckeri，是在1937年由Frank Paiva与William M. Tucker发现。") == "mixed"
    assert script("MIT OpenCourseWare指什么？") == "mixed"  # a query in two scripts is across neither
    assert script("1937 — 42") == "mixed"  # no letters at all


def test_only_a_cjk_latin_pair_is_shifted(settings):
    settings.SEARCH_CROSS_LANGUAGE_COSINE_SHIFT = 0.08
    assert cosine_shift("cjk", "Iwan Roberts was born in Bangor.") == 0.08
    assert cosine_shift("latin", "罗伯茨出生于威尔士班戈。") == 0.08
    assert cosine_shift("cjk", "罗伯茨出生于威尔士班戈。") == 0.0
    assert cosine_shift("cjk", "第二个种是P. tuckeri，由Frank Paiva与William M. Tucker发现。") == 0.0
    assert cosine_shift("cjk", "[MIT OpenCourseWare] 这个计划由William and Flora Hewlett Foundation、Andrew W. "
                               "Mellon Foundation资助。") == 0.0  # Latin by share, but its Chinese words match
    assert cosine_shift("cjk", "1937 — 42") == 0.0


def test_calibrated_relevance_is_a_probability_monotone_in_its_signal():
    for signal, values in {"mrag": (0.01, 0.3, 0.9), "chunk": (0.01, 0.3, 0.9), "bm25": (0.0, 5.0, 30.0),
                           "cosine": (0.7, 0.85, 0.95)}.items():
        scores = [calibrated(signal, v) for v in values]
        assert all(0.0 < s < 1.0 for s in scores) and scores == sorted(scores), (signal, scores)


def test_the_letter_counts_agree_with_a_count_of_every_letter_on_the_shared_corpora():
    """cjk_share counts runs (and skips ASCII) for speed; it must agree exactly with counting each letter."""
    import re

    from retrieval.relevance import PROBE_CHARS, _CJK, _LETTER, cjk_share
    from tests.shared_data import corpus_sentences

    def reference(text: str) -> float:
        probe = text[:PROBE_CHARS]
        letters = len(_LETTER.findall(probe))
        return len(_CJK.findall(probe)) / letters if letters else 0.0

    texts = corpus_sentences()  # LoCoMo turns and CMRC sentences
    texts += ["", "123 456", "第二个种是P. tuckeri，由Frank Paiva与William M. Tucker发现", "Ünïcödé naïve café",
              "ｆｕｌｌｗｉｄｔｈ", "ひらがなカタカナ한국어", "x" * 500 + "中", "²½ⅣⅫ", re.escape("a_b_c")]
    assert sum(t.isascii() for t in texts) > 1000 and sum(not t.isascii() for t in texts) > 1000
    for text in texts:
        assert cjk_share(text) == reference(text), text
