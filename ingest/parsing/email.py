"""E-mail (.eml and Outlook .msg): one section for the message, then its attachments parsed recursively."""

import email
import email.header
import logging
import mimetypes
import re
import tempfile
from email import policy
from email.message import EmailMessage
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded
from oxmsg import Message
from oxmsg.domain import constants

from .base import Block, ParsedDocument, ParseError, Section, TransientParseError
from .charset import bom_encoding, decode_bytes, looks_like_utf16, strip_controls
from .detect import OLE_MAGIC
from .dispatch import parse_file
from .html import html_blocks
from .text import split_paragraphs

logger = logging.getLogger(__name__)

# Mail forwarded as an attachment of an attachment of an attachment is rare; deeper is a loop or an attack.
MAX_ATTACHMENT_DEPTH = 3

# MIME parts inside parts (multipart or message/rfc822): a real email nests a handful (mixed >
# alternative > related, a forwarded mail inside); hundreds is an attack that would exhaust Python's stack.
MAX_MIME_DEPTH = 30
_TOO_DEEP = f"The email nests attachments more than {MAX_MIME_DEPTH} deep; it was not read."

# PGP/MIME and S/MIME enveloped data: the body is ciphertext.
_ENCRYPTED_TYPES = {"multipart/encrypted", "application/pkcs7-mime", "application/x-pkcs7-mime"}

_FIELDS = (("from", "From"), ("to", "To"), ("cc", "Cc"), ("date", "Date"), ("subject", "Subject"))


def _unflow(text: str, delsp: bool) -> str:
    """Undo RFC 3676 format=flowed soft line breaks (a line ending in a space continues)."""
    out, current = [], ""
    for line in text.split("\n"):
        line = line[1:] if line.startswith(" ") else line  # space-stuffing
        if line.endswith(" ") and line != "-- ":
            current += line[:-1] if delsp else line
        else:
            out.append(current + line)
            current = ""
    if current:
        out.append(current)
    return "\n".join(out)


def _part_text(part: EmailMessage) -> str:
    try:
        text = part.get_content()
    except (LookupError, UnicodeError, ValueError, AssertionError):
        # Unknown or lying charset label: sniff the bytes ourselves.
        text = decode_bytes(part.get_payload(decode=True) or b"", declared=part.get_content_charset()).text
    if not isinstance(text, str):
        return ""
    text = text.replace("\r\n", "\n")
    if (part.get_param("format") or "").lower() == "flowed":
        text = _unflow(text, (part.get_param("delsp") or "").lower() == "yes")
    return text


def _body_blocks(plain: str, html: str) -> list[Block]:
    plain, html = strip_controls(plain.replace("\r\n", "\n")), strip_controls(html)
    if plain.strip():
        return [Block(text=p) for p in split_paragraphs(plain)]
    if html.strip():
        try:
            return html_blocks(html)
        except ParseError:  # an HTML body of only comments or markup: the email still has its headers
            return []
    return []


def _header(msg: EmailMessage, name: str) -> str:
    try:
        value = msg.get(name)
        return re.sub(r"\s+", " ", str(value)).strip() if value is not None else ""
    except Exception:  # the stdlib header parser raises assorted errors on malformed headers
        raw = next((v for k, v in msg.raw_items() if k.lower() == name), "")
        return str(email.header.make_header(email.header.decode_header(raw))).strip()


def _attachment_parts(part: EmailMessage, body: set[int]):
    for sub in part.iter_parts():
        if id(sub) in body:
            continue
        if sub.get_content_type() == "message/rfc822":
            yield sub
        elif sub.is_multipart():
            yield from _attachment_parts(sub, body)
        elif sub.is_attachment() or sub.get_filename():
            yield sub


def _attachment(part: EmailMessage, number: int) -> tuple[str, bytes]:
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload()
        data = inner[0].as_bytes() if isinstance(inner, list) and inner else part.get_payload(decode=True) or b""
        subject = inner[0].get("subject", "") if isinstance(inner, list) and inner else ""
        return (part.get_filename() or f"{subject or f'message-{number}'}.eml"), data
    ext = mimetypes.guess_extension(part.get_content_type()) or ""
    return part.get_filename() or f"attachment-{number}{ext}", part.get_payload(decode=True) or b""


def _mime_depth(msg: EmailMessage) -> int:
    """How deep parts nest, walked without recursion so that measuring cannot overflow the stack."""
    deepest, stack = 0, [(msg, 1)]
    while stack:
        part, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_MIME_DEPTH:
            break
        payload = part.get_payload()
        if isinstance(payload, list):
            stack.extend((sub, depth + 1) for sub in payload if isinstance(sub, email.message.Message))
    return deepest


def _read_eml(path: Path) -> tuple[dict, list[Block], list[tuple[str, bytes]]]:
    data = path.read_bytes()
    encoding = bom_encoding(data) or looks_like_utf16(data)
    try:
        if encoding and encoding.startswith(("utf-16", "utf-32")):
            msg = email.message_from_string(decode_bytes(data).text, policy=policy.default)
        else:
            msg = email.message_from_bytes(data, policy=policy.default)
        if not msg.keys():
            raise ParseError("Could not read the email: it has no headers.")
        if _mime_depth(msg) > MAX_MIME_DEPTH:
            raise ParseError(_TOO_DEEP)
        if msg.get_content_type() in _ENCRYPTED_TYPES and msg.get_param("smime-type") != "signed-data":
            raise ParseError("The email is encrypted and cannot be read.")
        fields = {key: _header(msg, key) for key, _ in _FIELDS}
        plain_part, html_part = msg.get_body(("plain",)), msg.get_body(("html",))
        plain = _part_text(plain_part) if plain_part is not None else ""
        html = _part_text(html_part) if html_part is not None else ""
        body_ids = {id(p) for p in (plain_part, html_part) if p is not None}
        if msg.is_multipart():
            parts = list(_attachment_parts(msg, body_ids))
        else:  # a message that is nothing but one attached file
            parts = [msg] if msg.get_filename() and not body_ids else []
        attachments = [_attachment(part, n) for n, part in enumerate(parts, start=1)]
    except ParseError:
        raise
    except RecursionError:  # the stdlib parser recurses per level, before _mime_depth can look
        raise ParseError(_TOO_DEEP) from None
    except Exception as exc:  # the email package has no single error type for broken MIME
        raise ParseError(f"Could not read the email: {exc}") from exc
    return fields, _body_blocks(plain, html), attachments


def _read_msg(path: Path) -> tuple[dict, list[Block], list[tuple[str, bytes]], list[str]]:
    try:
        msg = Message.load(str(path))
        headers = {k.lower(): v for k, v in msg.message_headers.items()}
        content_type = headers.get("content-type", "").lower()
        if "encrypted" in content_type or msg.message_class.upper() == "IPM.NOTE.SMIME":
            raise ParseError("The email is encrypted and cannot be read.")
        props = msg.properties
        date = headers.get("date") or (msg.sent_date.isoformat() if msg.sent_date else "")
        fields = {
            "from": msg.sender or "",
            "to": headers.get("to") or props.str_prop_value(constants.PID_DISPLAY_TO) or "",
            "cc": headers.get("cc") or props.str_prop_value(constants.PID_DISPLAY_CC) or "",
            "date": date,
            "subject": msg.subject or headers.get("subject", ""),
        }
        blocks = _body_blocks(msg.body or "", msg.html_body or "")
        attachments, warnings = [], []
        for number, att in enumerate(msg.attachments, start=1):
            name = att.file_name or f"attachment-{number}"
            if att.file_bytes is None:
                warnings.append(f"Attachment {name}: embedded Outlook items are not extracted.")
            else:
                attachments.append((name, att.file_bytes))
        if not blocks and props.binary_prop_value(constants.PID_RTF_COMPRESSED):
            warnings.append("The message body is stored only as compressed RTF, which is not extracted.")
    except ParseError:
        raise
    except Exception as exc:  # oxmsg/olefile raise many error types on damaged files
        raise ParseError(f"Could not read the Outlook message: {exc}") from exc
    return fields, blocks, attachments, warnings


def _parse_attachment(name: str, data: bytes, depth: int) -> ParsedDocument:
    safe = re.sub(r"[^\w.\- ]", "_", Path(name.replace("\\", "/")).name)[-100:].strip(". ") or "attachment"
    with tempfile.TemporaryDirectory(prefix="loci-attachment-") as tmp:
        target = Path(tmp) / safe
        target.write_bytes(data)
        return parse_file(target, name, depth=depth + 1)


def parse(path: Path, *, filename: str, detected_type: str | None = None, depth: int = 0) -> ParsedDocument:
    """Parse an .eml or .msg file; attachments become further sections that cite this email."""
    with open(path, "rb") as f:
        is_msg = f.read(8) == OLE_MAGIC
    warnings: list[str] = []
    if is_msg:
        fields, blocks, attachments, warnings = _read_msg(path)
    else:
        fields, blocks, attachments = _read_eml(path)
    subject = fields["subject"] or "(no subject)"
    header = "\n".join(f"{label}: {fields[key]}" for key, label in _FIELDS if fields[key])
    email_section = Section(
        title=subject,
        section_path=[subject],
        blocks=[Block(text=header, kind="header"), *blocks],
        metadata={"email": fields},
    )
    sections, parsed = [email_section], []
    for name, data in attachments:
        if depth >= MAX_ATTACHMENT_DEPTH:
            warnings.append(
                f"Attachment {name}: not parsed, attachments are nested more than {MAX_ATTACHMENT_DEPTH} deep."
            )
            continue
        try:
            doc = _parse_attachment(name, data, depth)
        except (TransientParseError, SoftTimeLimitExceeded):
            raise  # retry the whole email rather than index it without this attachment; a time limit is the stage's
        except ParseError as exc:
            warnings.append(f"Attachment {name}: {exc}")
            continue
        except Exception as exc:  # a bug in one format's parser must not lose the email
            logger.exception("Attachment %r of %r failed to parse", name, filename)
            warnings.append(f"Attachment {name}: could not be parsed ({type(exc).__name__}).")
            continue
        for section in doc.sections:
            section.section_path = [subject, f"Attachment: {name}", *section.section_path]
            section.metadata.setdefault("attachment_of", filename)
        sections += doc.sections
        warnings += [f"Attachment {name}: {w}" for w in doc.metadata.get("warnings", [])]
        parsed.append({"name": name, "detected_type": doc.detected_type, "sections": len(doc.sections)})
    metadata = {"title": subject, "email": fields, "attachments": parsed, "warnings": warnings}
    return ParsedDocument(
        detected_type=detected_type or ("msg" if is_msg else "eml"), sections=sections, metadata=metadata
    )
