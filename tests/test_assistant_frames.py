"""An AI assistant's framing sentences ("By following these tips…") are no facts; a person's are."""

from datetime import datetime

from extraction.base import ExtractionUnit, Passage
from extraction.deterministic import DeterministicExtractor

WHEN = datetime(2023, 5, 20, 10, 0)
REPLY = ("Great question! A portable power bank lasts longer if you keep it between 20 and 80 percent charged. "
         "By following these tips, you will get the most out of your battery. "
         "Hopefully, these tips will help you on your next trip.")


def facts(role_of_reply: str) -> list[str]:
    passages = [Passage("t0", "I just bought a new portable power bank for my trips.", "user", WHEN),
                Passage("t1", REPLY, "assistant", WHEN)]
    unit = ExtractionUnit("", passages, language="en", reference_time=WHEN,
                          context={"participants": ["user", "assistant"],
                                   "assistant_speakers": ["assistant"] if role_of_reply == "assistant" else []})
    return [f.text for f in DeterministicExtractor().extract(unit).facts]


def test_an_assistants_framing_sentences_are_left_out_and_its_content_kept():
    texts = facts("assistant")
    assert any("20 and 80 percent" in t for t in texts)
    assert any("power bank for" in t for t in texts)  # the user's own statement
    assert not any("By following" in t or "Hopefully" in t for t in texts)


def test_the_same_words_from_a_person_stay_facts():
    assert any("Hopefully" in t for t in facts("user"))
