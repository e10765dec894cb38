"""OCR with tesseract: scanned PDF pages, images (Chinese and English, multi-page TIFF) and SVG."""

import io

import pymupdf
import pytest
from PIL import Image, ImageDraw, ImageFont

from ingest.parsing import image, ocr, pdf, svg
from ingest.parsing.base import ParseError, TransientParseError
from tests.conftest import DOCS

NOTO_CJK = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"


def text_image(lines: list[str], size=40) -> Image.Image:
    font = ImageFont.truetype(NOTO_CJK, size)
    picture = Image.new("L", (1200, 60 + len(lines) * size * 2), 255)
    draw = ImageDraw.Draw(picture)
    for row, line in enumerate(lines):
        draw.text((40, 30 + row * size * 2), line, font=font, fill=0)
    return picture


def png_bytes(picture: Image.Image) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_scanned_pdf_is_ocrd_page_by_page():
    path = DOCS / "pdf" / "loremipsum-flat.pdf"  # one page, a JPEG and no text layer

    parsed = pdf.parse(path, filename=path.name)

    assert parsed.detected_type == "pdf-ocr"
    assert parsed.metadata["ocr_pages"] == [1]
    assert parsed.sections[0].page == 1
    assert all(block.page == 1 for block in parsed.sections[0].blocks)
    text = parsed.sections[0].text
    assert "Lorem ipsum dolor sit amet, consectetur adipiscing elit." in text
    assert "Pellentesque" in text


def test_only_pages_without_a_text_layer_are_ocrd(tmp_path):
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 72), "A typed first page about quarterly revenue and the sales forecast.", fontsize=11)
    scanned = document.new_page()
    scanned.insert_image(pymupdf.Rect(36, 36, 576, 236), stream=png_bytes(text_image(["Scanned warehouse inventory"])))
    path = tmp_path / "mixed.pdf"
    document.save(path)

    parsed = pdf.parse(path, filename="mixed.pdf")

    assert parsed.detected_type == "pdf"  # one page of two is not "mostly OCR"
    assert parsed.metadata["ocr_pages"] == [2]
    pages = {block.page: block.text for section in parsed.sections for block in section.blocks}
    assert "quarterly revenue" in pages[1]
    assert "warehouse inventory" in pages[2].lower()


def test_every_tiff_frame_is_a_page_and_chinese_is_read_without_spaces(tmp_path):
    first = text_image(["知识库平台支持中文文档检索。", "我们在北京和上海都有办公室。"], size=48)
    second = text_image(["Delivery address Berlin, invoice 4711"])
    path = tmp_path / "scan.tiff"
    first.save(path, save_all=True, append_images=[second])

    parsed = image.parse(path, filename="scan.tiff")

    assert parsed.detected_type == "image"
    assert parsed.page_count == 2
    assert [section.page for section in parsed.sections] == [1, 2]
    assert "知识库平台支持中文文档检索" in parsed.sections[0].text
    assert "北京和上海" in parsed.sections[0].text
    assert "Berlin" in parsed.sections[1].text
    assert "4711" in parsed.sections[1].text
    assert parsed.metadata["ocr_confidence"] > 70


def test_a_photo_without_text_is_refused():
    path = DOCS / "img" / "example.jpg"  # a flower

    with pytest.raises(ParseError, match=r"^No text could be recognised in the image\.$"):
        image.parse(path, filename=path.name)


def test_a_damaged_image_is_refused(tmp_path):
    path = tmp_path / "broken.png"
    path.write_bytes((DOCS / "img" / "DA-1p.png").read_bytes()[:2000])

    with pytest.raises(ParseError, match="damaged"):
        image.parse(path, filename="broken.png")


def test_svg_text_elements_are_read_without_expanding_entities(tmp_path):
    path = tmp_path / "chart.svg"
    path.write_text(
        '<?xml version="1.0"?>\n'
        '<!DOCTYPE svg [<!ENTITY secret SYSTEM "file:///etc/hostname"><!ENTITY lol "lollollol">]>\n'
        '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="200"><title>Quarterly chart</title>'
        '<text x="10" y="20">Revenue <tspan font-weight="bold">grew</tspan> 12%</text>'
        '<text x="10" y="60"><tspan x="10">North</tspan><tspan x="10" dy="20">South &secret; &lol;</tspan></text>'
        '<text x="10" y="120">中文标签</text></svg>'
    )

    parsed = svg.parse(path, filename="chart.svg")

    assert parsed.detected_type == "svg"
    assert parsed.sections[0].title == "Quarterly chart"
    assert [block.text for block in parsed.sections[0].blocks] == ["Revenue grew 12%", "North South", "中文标签"]


def test_an_svg_without_text_elements_is_rendered_and_ocrd(tmp_path):
    import base64

    encoded = base64.b64encode(png_bytes(text_image(["Invoice total 4200 EUR"]))).decode()
    path = tmp_path / "scan.svg"
    path.write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" width="1200" height="140">'
        f'<image width="1200" height="140" href="data:image/png;base64,{encoded}"/></svg>'
    )

    parsed = svg.parse(path, filename="scan.svg")

    assert parsed.metadata["rendered"] is True
    assert "Invoice total 4200 EUR" in parsed.sections[0].text


def test_invalid_svg_is_refused(tmp_path):
    path = tmp_path / "bad.svg"
    path.write_text("<svg><text>unclosed")

    with pytest.raises(ParseError, match="not valid XML"):
        svg.parse(path, filename="bad.svg")


def test_a_tesseract_timeout_is_transient():
    picture = png_bytes(text_image(["slow"]))

    with pytest.raises(TransientParseError, match="timed out"):
        ocr.ocr_image(picture, timeout=0.01)


def test_words_and_wrapped_lines_are_joined_per_script():
    assert ocr.join_words(["知识", "库", "平台", "Loci", "是", "a", "platform", "。"]) == "知识库平台 Loci 是 a platform。"
    assert ocr.join_words(["일시불", "및", "할부"]) == "일시불 및 할부"
    assert ocr.join_lines(["The infor-", "mation is well-", "Known"]) == "The information is well- Known"
