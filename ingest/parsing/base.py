"""What every parser returns: a document as sections (future parent chunks) of blocks (child material)."""

from dataclasses import dataclass, field


class ParseError(Exception):
    """A permanent, user-readable reason a file cannot be parsed ("PDF is password-protected")."""


class TransientParseError(Exception):
    """A failure worth retrying (a converter timed out under load, a lock was busy, storage did not answer).

    `engine` names what did not answer, for the reason a document fails with when retries run out."""

    def __init__(self, message: str, *, engine: str = "The file converter"):
        super().__init__(message)
        self.engine = engine


@dataclass
class Block:
    """One unit of content inside a section: a paragraph, a table (header + rows), a cue, notes…"""

    text: str
    kind: str = "paragraph"  # paragraph | table | list | code | cue | notes | header | caption
    page: int | None = None
    start_time: float | None = None
    end_time: float | None = None
    speaker: str = ""
    metadata: dict = field(default_factory=dict)


@dataclass
class Section:
    """A structural unit: a heading's section, a page, a slide, a sheet, an email, a transcript window."""

    title: str
    section_path: list[str]
    blocks: list[Block] = field(default_factory=list)
    page: int | None = None
    slide: int | None = None
    sheet: str = ""
    start_time: float | None = None
    end_time: float | None = None
    metadata: dict = field(default_factory=dict)  # e.g. {"attachment_of": "mail.eml", "email": {...}}

    @property
    def text(self) -> str:
        return "\n\n".join(b.text for b in self.blocks if b.text.strip())


@dataclass
class ParsedDocument:
    detected_type: str  # pdf | pdf-ocr | image | svg | docx | doc | xlsx | xls | pptx | ppt | eml | html | md | txt | csv | tsv | vtt | …
    sections: list[Section]
    page_count: int | None = None
    language: str = ""
    metadata: dict = field(default_factory=dict)  # title, author, email headers, OCR pages, warnings
