"""Image parser: OCR of PNG, JPEG, WebP, TIFF (every frame a page), BMP and GIF with tesseract."""

import io
from pathlib import Path

from PIL import Image, ImageOps, ImageSequence, UnidentifiedImageError

from .base import Block, ParsedDocument, ParseError, Section, TransientParseError
from .ocr import OcrPage, check_ocr_budget, ocr_image

# Formats whose extra frames are pages; for GIF and WebP they are animation frames, OCR'd once.
_PAGED_FORMATS = {"TIFF", "MPO"}


def parse(path: Path, *, filename: str) -> ParsedDocument:
    """OCR each page of an image into a section of paragraphs."""
    try:
        with Image.open(path) as image:
            image_format = image.format or ""
            if image_format in _PAGED_FORMATS:
                check_ocr_budget(getattr(image, "n_frames", 1), "image")
            frames = ImageSequence.Iterator(image) if image_format in _PAGED_FORMATS else [image]
            pages = [ocr_image(_encode(frame)) for frame in frames]
    except (ParseError, TransientParseError):
        raise
    except Image.DecompressionBombError as exc:
        raise ParseError("The image is too large to process.") from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as exc:
        # Pillow reports truncated or malformed files with any of these.
        raise ParseError("The image is damaged or in an unsupported format.") from exc
    return ocr_document(pages, filename=filename, detected_type="image", metadata={"format": image_format.lower()})


def ocr_document(pages: list[OcrPage], *, filename: str, detected_type: str, metadata: dict) -> ParsedDocument:
    """A document from OCR results, one section per page; ParseError when no page had any text."""
    warnings = [f"No text could be recognised on page {n}." for n, page in enumerate(pages, 1) if not page.paragraphs]
    if len(warnings) == len(pages):
        raise ParseError("No text could be recognised in the image.")
    stem = Path(filename).stem
    sections = [
        Section(
            title=stem if len(pages) == 1 else f"{stem}, page {number}",
            section_path=[],
            page=number,
            blocks=[Block(text, page=number, metadata={"ocr": True}) for text in page.paragraphs],
        )
        for number, page in enumerate(pages, 1)
        if page.paragraphs
    ]
    confidences = [page.confidence for page in pages if page.confidence is not None]
    metadata = {
        **metadata,
        "ocr_pages": list(range(1, len(pages) + 1)),
        "ocr_confidence": round(sum(confidences) / len(confidences), 1),
        "warnings": warnings,
    }
    return ParsedDocument(detected_type=detected_type, sections=sections, page_count=len(pages), metadata=metadata)


def _encode(frame: Image.Image) -> bytes:
    """Upright 8-bit grey PNM: transparency flattened onto white so dark text on clear stays visible."""
    frame = ImageOps.exif_transpose(frame)
    if frame.mode in ("RGBA", "LA", "PA") or (frame.mode == "P" and "transparency" in frame.info):
        rgba = frame.convert("RGBA")
        background = Image.new("RGBA", rgba.size, "white")
        frame = Image.alpha_composite(background, rgba)
    frame = frame.convert("L")
    buffer = io.BytesIO()
    frame.save(buffer, format="PPM")
    return buffer.getvalue()
