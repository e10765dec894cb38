"""SVG parser: text of <text>/<tspan> elements; drawings without any are rendered with pymupdf and OCR'd."""

from pathlib import Path

import pymupdf
from lxml import etree

from .base import Block, ParsedDocument, ParseError, Section
from .image import ocr_document
from .ocr import join_words, ocr_image

# Render at ~300 dpi (SVG user units are 1/96 in) but never past this many pixels: a huge canvas
# would cost seconds of OCR per megapixel of mostly empty space.
RENDER_ZOOM = 300 / 96
RENDER_MAX_PIXELS = 25_000_000

_SVG = "{http://www.w3.org/2000/svg}"
# tspans that reposition are new lines or labels; those that do not are runs within one line.
_POSITION_ATTRIBUTES = ("x", "y", "dy")


def parse(path: Path, *, filename: str) -> ParsedDocument:
    """Text from the SVG's text elements, or OCR of the rendered drawing when it has none."""
    root = _load(path)
    title = _title(root) or Path(filename).stem
    texts = [text for element in root.iter(f"{_SVG}text", "text") if (text := _element_text(element))]
    if texts:
        section = Section(title=title, section_path=[], blocks=[Block(text) for text in texts])
        return ParsedDocument(detected_type="svg", sections=[section], metadata={"title": title})
    page = ocr_image(_render(root), dpi=300)
    return ocr_document([page], filename=filename, detected_type="svg", metadata={"title": title, "rendered": True})


def _load(path: Path) -> etree._Element:
    # No entity expansion (billion laughs), no DTD or network fetches (XXE).
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.parse(str(path), parser).getroot()
    except (etree.XMLSyntaxError, OSError, ValueError) as exc:
        raise ParseError(f"The SVG is not valid XML: {str(exc)[:200]}") from exc
    if root is None or etree.QName(root).localname != "svg":
        raise ParseError("The file is not an SVG image.")
    return root


def _title(root: etree._Element) -> str:
    for child in root:
        if isinstance(child.tag, str) and etree.QName(child).localname == "title":
            return " ".join("".join(child.itertext()).split())
    return ""


def _element_text(element: etree._Element) -> str:
    pieces: list[str] = []

    def walk(node: etree._Element):
        if node.text:
            pieces.append(node.text)
        for child in node:
            if isinstance(child.tag, str) and etree.QName(child).localname == "tspan":
                if any(child.get(name) is not None for name in _POSITION_ATTRIBUTES):
                    pieces.append(" ")
                walk(child)
            if child.tail:
                pieces.append(child.tail)

    walk(element)
    return join_words("".join(pieces).split())


def _render(root: etree._Element) -> bytes:
    # MuPDF gets the tree lxml already parsed safely (no DTD, no entities); it ignores external images itself.
    data = etree.tostring(root)
    try:
        with pymupdf.open(stream=data, filetype="svg") as document:
            page = document[0]
            zoom = RENDER_ZOOM
            area = page.rect.width * page.rect.height * zoom * zoom
            if area > RENDER_MAX_PIXELS:
                zoom *= (RENDER_MAX_PIXELS / area) ** 0.5
            pixmap = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), colorspace=pymupdf.csGRAY, alpha=False)
            return pixmap.tobytes("pnm")
    except Exception as exc:  # MuPDF raises plain RuntimeErrors for SVG it cannot draw
        raise ParseError("The SVG has no text and could not be rendered for OCR.") from exc
