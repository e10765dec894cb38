"""Choosing and running the parser for a file, by the type detected from its content."""

import importlib
from pathlib import Path

from .base import ParsedDocument, ParseError
from .detect import detect_type

# Detected type -> "module" (its parse()) or "module:function" in ingest.parsing; every entry point has the
# signature (path, *, filename) -> ParsedDocument.
PARSERS = {
    "pdf": "pdf",
    "image": "image",
    "svg": "svg",
    "docx": "docx",
    "doc": "docx:parse_doc",
    "xls": "xlsx:parse_xls",
    "ppt": "pptx:parse_ppt",
    "xlsx": "xlsx",
    "pptx": "pptx",
    "eml": "email",
    "msg": "email",
    "html": "html",
    "md": "text",
    "txt": "text",
    "rst": "text",
    "org": "text",
    "csv": "tabular",
    "tsv": "tabular",
    "vtt": "vtt",
    "epub": "fallback",
    "odt": "fallback",
    "rtf": "fallback",
    "xml": "fallback",
    "json": "fallback",
}

# Modules serving several types are told which one they got; email also needs the attachment depth.
_TAKES_TYPE = {"text", "tabular", "fallback", "email"}
_TAKES_DEPTH = {"email"}


def parse_file(path: Path, filename: str, *, max_bytes: int | None = None, depth: int = 0,
               detected: str | None = None) -> ParsedDocument:
    """Parse a stored upload into sections; ParseError carries the reason to show the user.

    `detected`: the file's type when the caller detected it already (`detect_type`), so a document
    is not read for its type twice.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ParseError(f"The file could not be opened: {exc.strerror or exc}") from exc
    if size == 0:
        raise ParseError("The file is empty.")
    if max_bytes is not None and size > max_bytes:
        raise ParseError(f"The file is too large ({_megabytes(size)}; the limit is {_megabytes(max_bytes)}).")
    detected = detected or detect_type(path, filename)
    entry = PARSERS.get(detected)
    if entry is None:
        raise ParseError(f"Unsupported file type: {detected}.")
    module_name, _, function_name = entry.partition(":")
    try:
        module = importlib.import_module(f"{__package__}.{module_name}")
        parser = getattr(module, function_name or "parse")
    except (ModuleNotFoundError, AttributeError) as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name != f"{__package__}.{module_name}":
            raise  # a missing third-party library is a deployment bug, not the user's file
        raise ParseError(f"Unsupported file type: no parser for {detected} files is installed.") from exc
    kwargs: dict = {"filename": filename}
    if module_name in _TAKES_TYPE:
        kwargs["detected_type"] = detected
    if module_name in _TAKES_DEPTH:
        kwargs["depth"] = depth
    document = parser(path, **kwargs)
    # A module may refine the type (pdf -> pdf-ocr); otherwise it is what detection found.
    document.detected_type = document.detected_type or detected
    return document


def _megabytes(size: int) -> str:
    return f"{size / 1024**2:.1f} MB"
