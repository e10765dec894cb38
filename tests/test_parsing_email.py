"""E-mail parsing: headers, bodies in every encoding, and attachments parsed recursively and cited."""

from email.message import EmailMessage

import pytest

from ingest.parsing import email as email_parser
from ingest.parsing.base import ParseError
from ingest.parsing.dispatch import parse_file
from tests.conftest import DOCS


def _message(subject: str, body: str = "Body text.") -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "Alice <alice@example.com>"
    msg["To"] = "Bob <bob@example.com>"
    msg["Cc"] = "Carol <carol@example.com>"
    msg["Date"] = "Tue, 01 Oct 2024 12:34:56 -0500"
    msg["Subject"] = subject
    msg.set_content(body)
    return msg


def _write(tmp_path, msg: EmailMessage, name: str = "mail.eml"):
    path = tmp_path / name
    path.write_bytes(msg.as_bytes())
    return path


def test_email_section_has_headers_body_and_the_attachment_citing_it():
    doc = parse_file(DOCS / "eml/fake-email-attachment.eml", "fake-email-attachment.eml")
    assert doc.detected_type == "eml"
    mail, attachment = doc.sections
    assert mail.title == "Fake email with attachment" and mail.section_path == ["Fake email with attachment"]
    assert mail.metadata["email"]["from"] == "Mallori Harrell <mallori@unstructured.io>"
    assert mail.metadata["email"]["date"] == "Fri, 23 Dec 2022 12:08:48 -0600"
    header = mail.blocks[0]
    assert header.kind == "header"
    assert header.text.split("\n") == [
        "From: Mallori Harrell <mallori@unstructured.io>",
        "To: Mallori Harrell <mallori@unstructured.io>",
        "Date: Fri, 23 Dec 2022 12:08:48 -0600",
        "Subject: Fake email with attachment",
    ]
    assert [b.text for b in mail.blocks[1:3]] == ["Hello!", "Here's the attachments!"]
    assert attachment.section_path == [
        "Fake email with attachment",
        "Attachment: fake-attachment.txt",
        "fake-attachment",
    ]
    assert attachment.metadata["attachment_of"] == "fake-email-attachment.eml"
    assert attachment.text == "Hey this is a fake attachment!"
    assert doc.metadata["attachments"] == [{"name": "fake-attachment.txt", "detected_type": "txt", "sections": 1}]
    assert doc.metadata["warnings"] == []


@pytest.mark.parametrize("name", ["eml/fake-email-b64.eml", "eml/fake-email-utf-16.eml"])
def test_base64_and_utf16_emails_are_decoded(name):
    doc = email_parser.parse(DOCS / name, filename=name)
    (mail,) = doc.sections
    assert mail.title == "Test Email"
    assert [b.text for b in mail.blocks[1:]] == [
        "This is a test email to use for unit tests.",
        "Important points:",
        "- Roses are red\n- Violets are blue",
    ]


def test_plain_text_is_preferred_and_html_is_the_fallback():
    both = email_parser.parse(DOCS / "eml/mime-different-plain-html.eml", filename="both.eml")
    assert both.sections[0].blocks[1].text == "This is the text/plain part."
    html_only = email_parser.parse(DOCS / "eml/mime-html-only.eml", filename="html.eml")
    texts = [b.text for b in html_only.sections[0].blocks[1:]]
    assert texts[0] == "This is a text/html part."
    assert texts[2].startswith("Gmail was launched by Google in 2004")
    assert not any("<p>" in t for t in texts)


def test_an_empty_plain_part_falls_back_to_html(tmp_path):
    msg = _message("Newsletter", "   \n")
    msg.add_alternative(
        "<h1>News</h1><table><tr><th>Item</th><th>Price</th></tr><tr><td>Tea</td><td>3</td></tr></table>",
        subtype="html",
    )
    doc = email_parser.parse(_write(tmp_path, msg), filename="news.eml")
    assert [b.kind for b in doc.sections[0].blocks] == ["header", "paragraph", "table"]
    assert doc.sections[0].blocks[2].text == "Item | Price\nTea | 3"


def test_format_flowed_lines_are_rejoined(tmp_path):
    msg = _message("Flowed")
    msg.set_content("The password was \nrecently changed.\n\nSecond paragraph.\n", params={"format": "flowed"})
    doc = email_parser.parse(_write(tmp_path, msg), filename="flowed.eml")
    assert [b.text for b in doc.sections[0].blocks[1:]] == ["The password was recently changed.", "Second paragraph."]


def test_outlook_msg_with_attachment():
    doc = parse_file(DOCS / "fake-email-attachment.msg", "fake-email-attachment.msg")
    assert doc.detected_type == "msg"
    mail, attachment = doc.sections
    assert mail.metadata["email"]["subject"] == "Fake email with attachment"
    assert mail.metadata["email"]["to"] == '"Mallori Harrell" <mallori@unstructured.io>'
    assert [b.text for b in mail.blocks[1:3]] == ["Hello!", "Here's the attachments!"]  # CRLF body normalised
    assert attachment.section_path[1] == "Attachment: fake-attachment.txt"
    assert attachment.metadata["attachment_of"] == "fake-email-attachment.msg"


def test_failing_attachments_become_warnings_not_failures(tmp_path):
    msg = _message("Quarterly numbers")
    msg.add_attachment(b"region,revenue\nnorth,10\nsouth,12\n", maintype="text", subtype="csv", filename="numbers.csv")
    msg.add_attachment(b"", maintype="application", subtype="octet-stream", filename="empty.bin")
    msg.add_attachment(bytes(range(256)) * 8, maintype="application", subtype="octet-stream", filename="blob.dat")
    doc = parse_file(_write(tmp_path, msg, "q.eml"), "q.eml")
    assert [s.section_path[:2] for s in doc.sections[1:]] == [["Quarterly numbers", "Attachment: numbers.csv"]]
    assert "region: south | revenue: 12" in doc.sections[1].text
    assert doc.metadata["warnings"] == [
        "Attachment empty.bin: The file is empty.",
        "Attachment blob.dat: Unsupported file type: unrecognised .dat file content.",
    ]


def test_forwarded_email_and_its_attachment_cite_their_own_parents(tmp_path):
    inner = _message("Original report", "See the notes.")
    inner.add_attachment(b"Remember the milk.", maintype="text", subtype="plain", filename="notes.txt")
    outer = _message("Fwd: Original report", "Forwarding this.")
    outer.add_attachment(inner, filename="forwarded.eml")
    doc = parse_file(_write(tmp_path, outer, "outer.eml"), "outer.eml")
    paths = [(s.section_path, s.metadata.get("attachment_of")) for s in doc.sections]
    assert paths == [
        (["Fwd: Original report"], None),
        (["Fwd: Original report", "Attachment: forwarded.eml", "Original report"], "outer.eml"),
        (
            ["Fwd: Original report", "Attachment: forwarded.eml", "Original report", "Attachment: notes.txt", "notes"],
            "forwarded.eml",
        ),
    ]
    assert doc.sections[2].text == "Remember the milk."


def test_attachment_nesting_stops_at_the_depth_limit(tmp_path):
    msg = _message("level 5")
    msg.add_attachment(b"deepest", maintype="text", subtype="plain", filename="deep.txt")
    for level in range(4, -1, -1):
        wrapper = _message(f"level {level}")
        wrapper.add_attachment(msg, filename=f"level{level + 1}.eml")
        msg = wrapper
    doc = parse_file(_write(tmp_path, msg), "mail.eml")
    titles = [s.title for s in doc.sections]
    assert titles == ["level 0", "level 1", "level 2", "level 3"]
    assert doc.metadata["warnings"] == [
        "Attachment level1.eml: Attachment level2.eml: Attachment level3.eml: "
        "Attachment level4.eml: not parsed, attachments are nested more than 3 deep."
    ]


def test_text_without_headers_is_not_an_email(tmp_path):
    path = tmp_path / "note.eml"
    path.write_text("just a note, no headers at all\n")
    with pytest.raises(ParseError, match="no headers"):
        email_parser.parse(path, filename="note.eml")


def test_a_damaged_outlook_message_fails_readably(tmp_path):
    path = tmp_path / "cut.msg"
    path.write_bytes((DOCS / "fake-email.msg").read_bytes()[:3000])
    with pytest.raises(ParseError):
        parse_file(path, "cut.msg")
