"""Coreference in documents: "the company", "该公司" and a sentence-initial he/she become the name they stand
for, and a fact starting "It…" is prefixed with its section's topic, so a fact read alone says what it is
about. Like the chats' rules (coreference.py), a guess is worse than a pronoun left alone.
"""

import re

from entities.extraction import find_mentions

# "The company reported…", "该公司运营…": a definite description standing for the last name of its kind.
_DOC_NOUN = re.compile(r"^(?:The|the|This|this) (?P<noun>company|firm|corporation|organi[sz]ation|group|business|bank|"
                       r"university|school|city|town|country)\b(?!['’]s)")
_DOC_ZH_NOUN = re.compile(r"^(?:该|这家|此|这个|这所|这座)(?P<noun>公司|企业|集团|机构|组织|银行|大学|学校|城市|国家)")
_DOC_KIND = {"company": "organization", "firm": "organization", "corporation": "organization",
             "organization": "organization", "organisation": "organization", "group": "organization",
             "business": "organization", "bank": "organization", "university": "organization", "school": "organization",
             "city": "place", "town": "place", "country": "place", "公司": "organization", "企业": "organization",
             "集团": "organization", "机构": "organization", "组织": "organization", "银行": "organization",
             "大学": "organization", "学校": "organization", "城市": "place", "国家": "place"}
_DOC_PERSON = re.compile(r"^(?:(?P<en>He|She)\b|(?P<zh>[他她])(?![们人]))")
_ZH_ORG_IS = re.compile(r"^(?P<name>[\u4e00-\u9fffA-Za-z]{2,12}?)(?:是|为)[^，。]{0,12}?(?:一家|一个|一所)[^，。]{0,12}?"
                        r"(?:公司|企业|运营商|集团|银行|大学|机构|组织|厂商|品牌)")
DOCUMENT_WINDOW = 2  # sentences back in which a document's he/she looks for its one person


class DocumentReferents:
    """The names a document section has used so far, for "the company", "该公司" and a sentence-initial he/she.

    As in chats, a guess is worse than a pronoun left alone: "the company" takes the last
    organisation named only when one was named in this section, and "He"/"她" the one person named
    in the last DOCUMENT_WINDOW sentences, if exactly one was.
    """

    def __init__(self):
        self.last: dict[str, str] = {}
        self.people: list[set[str]] = []

    def resolve(self, sentence: str) -> str:
        noun = _DOC_NOUN.match(sentence) or _DOC_ZH_NOUN.match(sentence)
        if noun:
            name = self.last.get(_DOC_KIND[noun.group("noun").lower()], "")
            return name + sentence[noun.end():] if name else sentence
        pronoun = _DOC_PERSON.match(sentence)
        if pronoun:
            recent = set().union(*self.people[-DOCUMENT_WINDOW:]) if self.people else set()
            if len(recent) == 1:
                return recent.pop() + sentence[pronoun.end():]
        return sentence

    def note(self, sentence: str) -> None:
        people = set()
        named_org = _ZH_ORG_IS.match(sentence)  # "盛大网络是中国大陆的一家游戏运营商": jieba tags no organisation
        if named_org:
            self.last["organization"] = named_org.group("name")
        for found in find_mentions(sentence):
            if found.type in ("organization", "place"):
                self.last[found.type] = _bare(found.surface)
            elif found.type == "person":
                people.add(_bare(found.surface))
        # A full name and its first part ("Anna Pavlovna Scherer", "Anna Pavlovna") are one person.
        people = {p for p in people if not any(p != q and p in q for q in people)}
        self.people.append(people)


def _bare(surface: str) -> str:
    return re.sub(r"['’]s$", "", surface.strip())


_DOCUMENT_ANAPHOR = re.compile(r"^(?:It|Its|This|These|They|该|它|此|这)(?=\b|[\u4e00-\u9fff])")


def prefix_topic(text: str, topic: str) -> str:
    """'It supports X' → '[Topic] It supports X', so a fact read alone still says what it is about."""
    if topic and _DOCUMENT_ANAPHOR.match(text):
        return f"[{topic}] {text}"
    return text
