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


# Session 10: name lists from registry packages (entities/data) and brand cues, from the dev mistakes.
@pytest.mark.parametrize("text, expected", [
    # Two or three capitalised words are a person only when the first is a given name.
    ("We met Anna Pavlovna at the party.", {"Anna Pavlovna": "person"}),
    ("I could talk about Game of Thrones forever.", {"Game of Thrones": ""}),
    # A city with no cue, or after a "from" that is no person's.
    ("Acme Logistics handles shipping from Rotterdam.", {"Acme Logistics": "organization", "Rotterdam": "place"}),
    ("The Toronto office moved to 55 King Street West.", {"Toronto": "place", "King Street West": "place"}),
    # A brand by what it sells or signs; a team by a place and a plural.
    ("Biscuit sleeps on the Ikea sofa all day.", {"Ikea": "organization"}),
    ("I'm also in talks with Gatorade about a sponsorship.", {"Gatorade": "organization"}),
    ("I signed with the Minnesota Wolves for the season.", {"Minnesota Wolves": "organization"}),
])
def test_names_typed_by_lists_and_brand_cues(text, expected):
    assert named(text) == expected


def test_a_transliterated_city_that_jieba_tags_as_a_person_is_a_place():
    found = named("我下个月要去西雅图看比赛，然后去艾尔帕索。")
    assert found.get("西雅图") == "place" and found.get("艾尔帕索") == "place"


def test_a_chinese_person_named_like_a_city_stays_a_person():
    # 林肯 (Lincoln, Nebraska) is a US city too; the lists leave out cities named like people.
    assert named("我最近在读林肯的传记。").get("林肯") == "person"
