"""Entities worth browsing (issue 28): what find_mentions lists from a chat or a document, and as what.

In the issue's trial the dog Mochi was typed "work", Fabrikam and Contoso "place", one entity was
named "Mochi每天早上都要去公园散步", and a tenant's top entities included "Page", "Period", "QA",
"In" and "With" from table headers. bench/entities.py measures the same on 170 labelled mentions.
"""

import pytest

from entities.extraction import find_mentions


def named(text: str, known=()) -> dict[str, str]:
    return {m.surface: m.type for m in find_mentions(text, frozenset(known)) if m.type not in ("date", "amount")}


def test_a_name_before_chinese_text_is_the_name_alone():
    assert named("Mochi每天早上都要去公园散步。", {"mochi"}) == {"Mochi": ""}


@pytest.mark.parametrize("text, expected", [
    ("I live in Boston with my dog Mochi.", {"Boston": "place", "Mochi": "other"}),
    ("Big news: I now work at Fabrikam!", {"Fabrikam": "organization"}),
    ("I work at Contoso as a data analyst.", {"Contoso": "organization"}),
    ("My manager Priya Shah hired me.", {"Priya Shah": "person"}),
    ("I'm going to Japan next month, first Tokyo and then Kyoto.", {"Japan": "place", "Tokyo": "place",
                                                                    "Kyoto": "place"}),
    ("With these words she greeted Prince Vasili Kuragin.", {"Prince Vasili Kuragin": "person"}),
])
def test_english_names_get_the_type_their_context_gives(text, expected):
    assert named(text) == expected


@pytest.mark.parametrize("text", [
    "Page | Period | Segment | Revenue | Total | QA | Notes\n1 | Q1 2023 | 1,200 | 1,450 | In | With",
    "Name | Date | Description | Status | Owner",
    "Section 12(b) of the Act: Title of each class, Trading symbol",
])
def test_table_headers_and_generic_words_are_no_entities(text):
    assert named(text) == {}


def test_chinese_titles_are_works_and_places_stay_places():
    found = named("最近我读了《局外人》和《时间的礼物》，下个月去成都。")
    assert found["局外人"] == "work" and found["时间的礼物"] == "work" and found["成都"] == "place"
