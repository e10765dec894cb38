"""Coreference in documents (issue 28): "the company", "该公司" and a he/she with one person before it
become the name before the facts are indexed, so a fact read alone says whom it is about."""

import pytest

from extraction.base import ExtractionUnit, Passage
from extraction.deterministic import DeterministicExtractor


def facts(*paragraphs: str) -> list[str]:
    unit = ExtractionUnit("Report", [Passage(f"p{i}", text) for i, text in enumerate(paragraphs)])
    return [f.text for f in DeterministicExtractor().extract(unit).facts]


@pytest.mark.parametrize("paragraph, expected", [
    # The 10-K of the shared documents, and War and Peace's first chapter.
    ("Galaxy Gaming, Inc. develops casino table games in Las Vegas. The company licenses its games to casinos "
     "across North America.", "Galaxy Gaming licenses its games to casinos across North America."),
    ("Anna Pavlovna had had a cough for some days. She was suffering from la grippe, a new word in St. Petersburg.",
     "Anna Pavlovna was suffering from la grippe, a new word in St. Petersburg."),
    ("盛大网络是中国大陆的一家游戏运营商。该公司获得了《泡泡堂》的运营权。", "盛大网络获得了《泡泡堂》的运营权。"),
    ("鲁迅是中国现代著名作家。他出生于浙江绍兴，原名周树人。", "鲁迅出生于浙江绍兴，原名周树人。"),
])
def test_a_definite_description_or_pronoun_becomes_the_name(paragraph, expected):
    assert expected in facts(paragraph)


def test_two_people_before_a_pronoun_leave_it_alone():
    found = facts("Anna Pavlovna greeted Prince Vasili Kuragin at the door. He kissed her hand and sat on the sofa.")
    assert any(f.startswith("He kissed") or "[Report] He kissed" in f for f in found), found


def test_the_company_with_no_company_named_stays():
    found = facts("Revenue grew by 12 percent in 2023. The company expects further growth in 2024.")
    assert any("The company expects" in f for f in found), found


def test_the_setting_turns_it_off(settings):
    """EXTRACTION_DOCUMENT_COREFERENCE=0 (the with/without measurement of bench.docqa) keeps the sentence as written."""
    settings.EXTRACTION_DOCUMENT_COREFERENCE = False
    assert "该公司获得了《泡泡堂》的运营权。" in " ".join(facts("盛大网络是中国大陆的一家游戏运营商。该公司获得了《泡泡堂》的运营权。"))
    found = facts("Galaxy Gaming, Inc. develops casino table games in Las Vegas. The company licenses its games to "
                  "casinos across North America.")
    assert any("The company licenses its games" in f for f in found), found
