"""How a question's words place it in time (retrieval/search/tense.py), in English and Chinese."""

import pytest

from retrieval.search.tense import tense_of


@pytest.mark.parametrize("question, tense", [
    ("Where do I work now?", "present"),
    ("What brand of BBQ sauce am I currently obsessed with?", "present"),  # LongMemEval 44_18bc8abd
    ("我现在在哪里工作？", "present"),
    ("我目前住在哪个城市？", "present"),
    ("Where did I use to work?", "past"),
    ("Where did I live before I moved?", "past"),
    ("我以前在哪里工作？", "past"),
    ("How old is my dog?", ""),  # "old" is no time
    ("What did I do last Thursday?", ""),
    ("Where did I work before, and where do I work now?", ""),  # both: left as it is
])
def test_a_question_is_about_the_present_the_past_or_neither(question, tense):
    assert tense_of(question) == tense
