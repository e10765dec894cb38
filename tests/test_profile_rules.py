"""The profile rules on facts as the extractor writes them (LoCoMo dev conversations 0-1, the issue's
trial chat, Chinese chats): which items a fact gives, and which topics count towards an interest.
Each rule revised in issue 28 (session 9), in English and in Chinese where the rule has a Chinese side."""

import pytest

from conversations.profile_rules import interests_in, items_in

NAMES = ["Caroline", "Melanie"]


def items(text, speaker="Melanie", names=NAMES):
    return {(i.subject, i.category, i.value) for i in items_in(text, speaker, names)}


@pytest.mark.parametrize("text, expected", [
    ("Melanie is carving out some me-time each day - running, reading, or playing their violin.", {"music", "reading",
                                                                                                  "running"}),
    ("我每天晚上都弹吉他。", {"music"}),
    ("我周末常常去爬山。", {"hiking"}),
])
def test_a_topic_word_counts(text, expected):
    assert set(interests_in(text, "Melanie", NAMES)) == expected


@pytest.mark.parametrize("text", [
    "It'll be tough as a single parent, but Caroline is up for the challenge!",  # "sing" in "single"
    "Painting's great for expressing themself.",  # …and in "expressing" (painting counts, music does not)
    "Jon loves running their own studio.",  # running a business is not the sport
    "We always look forward to our family camping trip.",  # camping, not travel
    "Melanie is swamped with the kids & work.",  # "swam"
])
def test_a_word_inside_another_is_no_topic(text):
    found = interests_in(text, "Caroline", ["Caroline", "Jon"])
    assert not {"music", "running", "travel", "swimming"} & set(found), found


@pytest.mark.parametrize("text, speaker, names", [
    ("Caroline loves that Melanie chose pottery for Melanie's art.", "Caroline", NAMES),
    ("Glad Melanie had a blast at the concert.", "Caroline", NAMES),
    ("李雷说韩梅梅的吉他弹得很好。", "李雷", ["李雷", "韩梅梅"]),
])
def test_a_fact_naming_the_other_participant_counts_for_nobody(text, speaker, names):
    assert interests_in(text, speaker, names) == []


@pytest.mark.parametrize("text, speaker, expected", [
    ("Unfortunately, Gina also lost their job at Door Dash this month.", "Gina", ("Gina", "occupation", "Door Dash")),
    ("Gina opened an online clothing store and it's been great!", "Gina",
     ("Gina", "occupation", "online clothing store")),
    ("Whoa, Gina's store looks great!", "Jon", ("Gina", "possession", "store")),
    ("Marrying Melanie's partner and promising to be together forever was the best part.", "Melanie",
     ("Melanie", "family", "married")),
    ("It made Caroline even more determined to adopt.", "Caroline", ("Caroline", "goal", "adopt")),
    ("It's been a dream to adopt and provide a safe, loving home for kids who need it.", "Caroline",
     ("Caroline", "goal", "adopt")),
    ("Caroline has been looking into counseling and mental health as a career.", "Caroline",
     ("Caroline", "goal", "a career in counseling and mental health")),
    ('Caroline loved "Becoming Nicole" by Amy Ellis Nutt.', "Caroline",
     ("Caroline", "preference", "Becoming Nicole\" by Amy Ellis Nutt")),
    ("Jon is passionate about dancing and it brings Jon so much joy.", "Jon", ("Jon", "preference", "dance")),
    ("Jon wanna starts a dance studio so Jon can teach others.", "Jon", ("Jon", "goal", "starts a dance studio")),
    ("我的狗Mochi每天早上都要去公园散步。", "Alex", ("Alex", "pet", "狗")),
    ("我现在在Fabrikam工作。", "Alex", ("Alex", "occupation", "Fabrikam")),
])
def test_an_item_the_fact_states(text, speaker, expected):
    assert expected in items(text, speaker, ["Caroline", "Melanie", "Gina", "Jon", "Alex"])


@pytest.mark.parametrize("text, speaker, unwanted", [
    ("They were scared but we reassured them and explained their brother would be OK.", "Melanie",
     ("Melanie", "family", "brother")),  # "their" is the kids': no one named before it
    ("Here's a photo of Melanie's horse painting Melanie did recently.", "Melanie", ("Melanie", "pet", "horse")),
    ("Caroline is passionate about helping people and making a positive impact.", "Caroline",
     ("Caroline", "preference", "helping people")),
    ("Gina loves finding new trends for their store.", "Gina", ("Gina", "preference", "finding new trends")),
    ("Lost Jon's job as a banker yesterday, so Jon is gonna take a shot at starting their own business.", "Jon",
     ("Jon", "goal", "take a shot at starting their")),
])
def test_no_item_from_a_fact_that_does_not_state_it(text, speaker, unwanted):
    assert unwanted not in items(text, speaker, ["Caroline", "Melanie", "Gina", "Jon"])
