"""retrieval.text: the BM25 terms both keyword backends index and query with."""

import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.text import STOP_WORDS, index_terms, segment, tokenize


@pytest.mark.parametrize("term", ["c++", "c#", "f#", "node.js", "3.14", "at&t", "50%", "v1.2.3", ".net"])
def test_technical_terms_survive_whole(term):
    assert term in tokenize(f"We use {term.upper()} daily.")


def test_cpp_is_not_c():
    assert tokenize("C++") == ["c++"] and tokenize("C") == ["c"] and tokenize("C#") == ["c#"]


def test_dotted_and_hyphenated_words_also_yield_their_parts():
    assert tokenize("node.js") == ["node.js", "node", "js"]
    assert tokenize("state-of-the-art") == ["state-of-the-art", "state", "art"]  # "of", "the" are stop words
    assert tokenize("3.14") == ["3.14"]  # a decimal is one number, not "3" and "14"


def test_lowercases_and_drops_english_stop_words_and_punctuation():
    assert tokenize("The Quick, brown FOX -- jumps over the lazy dog!!! ... ()[]{}") == [
        "quick", "brown", "fox", "jumps", "lazy", "dog"]


def test_english_single_letters_and_digits_are_kept():
    assert tokenize("x y 7 2024") == ["x", "y", "7", "2024"]


def test_chinese_is_segmented_for_search_without_single_characters_or_stop_words():
    terms = tokenize("中华人民共和国成立了。我们是程序员")
    assert {"中华", "人民", "共和国", "中华人民共和国", "成立", "程序员"} <= set(terms)
    assert all(len(t) >= 2 for t in terms)  # 了, 是 gone
    assert "我们" not in terms and "我们" in STOP_WORDS


def test_mixed_chinese_and_english():
    assert tokenize("用C++写代码，部署到node.js") == ["c++", "代码", "部署", "node.js", "node", "js"]


def test_width_and_accents_are_folded_but_kana_marks_kept():
    assert tokenize("ＡＢＣ１２３ café naïve") == ["abc123", "cafe", "naive"]
    assert tokenize("が") == ["が"]  # the voicing mark is part of the kana, not an accent


def test_apostrophes_join_words():
    assert tokenize("the user's files don't sync") == ["users", "files", "sync"]


@pytest.mark.parametrize("text", ['") OR tenant_id:2 --', "NEAR(", "*", '"', "''", "\x00\n\t", ""])
def test_hostile_or_empty_text_gives_plain_terms(text):
    assert all(t and '"' not in t and "(" not in t and "*" not in t for t in tokenize(text))


def test_segment_joins_terms_with_spaces():
    assert segment("Hello, C++ world") == "hello c++ world"
    assert segment("") == ""


def test_index_terms_stem_english_words_only():
    assert index_terms("Audrey's dogs were running studies") == ["audrey", "dog", "run", "studi"]
    assert index_terms("C++ node.js 3.14 50% 人工智能") == tokenize("C++ node.js 3.14 50% 人工智能")
    assert index_terms("the dog") == index_terms("dogs") == ["dog"]


def test_tokenize_keeps_the_surface_words_and_segment_stores_the_stems():
    assert tokenize("running dogs") == ["running", "dogs"]
    assert segment("running dogs") == "run dog"


def test_jieba_loads_lazily_and_quietly():
    code = (
        "import sys; import retrieval.text as t; assert 'jieba' not in sys.modules; "
        "assert t.tokenize('hello world') == ['hello', 'world']; assert 'jieba' not in sys.modules; "
        "print(t.tokenize('人工智能'))"
    )
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert "人工智能" in done.stdout
    assert done.stderr == ""  # no "Building prefix dict ..." chatter
