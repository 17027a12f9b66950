"""Page text from the render workers: PDF text layers (reading order, unicode, CJK), broken layers treated as
missing, OCR of scans and image files as the setting says, a missing or failing engine, and the text-only
stream :meth:`Renderer.texts`.

OCR needs tesseract (Debian's tesseract-ocr and tesseract-ocr-eng, which ``make setup`` installs); the test
of an embedded CJK font needs WenQuanYi Zen Hei (Debian's fonts-wqy-zenhei) and says so when it is absent.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
import pytest
from PIL import Image, ImageDraw, ImageFont

from docvec import ConfigError
from docvec._model._profiles import JINA_V4
from docvec._render import ExtractedText, PageFailure, RenderedPage, Renderer, _ocr
from docvec._render import _worker as w

from .documents import DOCUMENTS, make_pages_pdf, make_text_pdf, manifest_rows, write_pdf

TARGET_PIXELS = JINA_V4.max_pixels
#: what the scanned pages say (large, clean type: OCR reads every word)
SCAN_LINES = [
    "Quarterly revenue grew twelve percent",
    "The invoice total is due in March",
    "Northwind containers arrive on Monday",
]
#: the CJK font the embedded-font test uses, and the Debian package that ships it
CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")
CJK_PACKAGE = "fonts-wqy-zenhei"


def words(text: str | None) -> set[str]:
    return set(re.findall(r"\w+", (text or "").casefold()))


def one(items: list[RenderedPage | PageFailure]) -> RenderedPage:
    (page,) = items
    assert isinstance(page, RenderedPage), page
    return page


# -- documents -------------------------------------------------------------------------------------------


def scan_image(lines: list[str], size: tuple[int, int] = (1654, 2339), font_px: int = 44) -> Image.Image:
    """A scanned page: ``lines`` drawn in black on white (A4 at 200 dpi by default), no text layer."""
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=font_px)  # Pillow's own FreeType font: no system font needed
    for i, line in enumerate(lines):
        draw.text((size[0] // 10, size[1] // 10 + int(i * font_px * 1.8)), line, fill="black", font=font)
    return image


def scan_pdf(path: Path, lines: list[str] = SCAN_LINES) -> Path:
    """An image-only PDF (the scan of an A4 page at 200 dpi), as scanners write them."""
    scan_image(lines).save(path, "PDF", resolution=200)
    return path


def font_page_pdf(path: Path, font: bytes, ops: bytes, *extra: bytes) -> Path:
    """A one-page A4 PDF whose font (object 3, ``/F1``) and further objects (4, 5, ...) are given."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", font, *extra]
    objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(ops), ops))
    objects.append(
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595.3 841.9] /Contents %d 0 R"
        b" /Resources << /Font << /F1 3 0 R >> >> >>" % len(objects)
    )
    return write_pdf(path, objects, [len(objects)])


def to_unicode(pairs: list[tuple[int, str]], code_bytes: int) -> bytes:
    """A /ToUnicode CMap stream mapping each code to its text (UTF-16BE, surrogate pairs included)."""
    digits = 2 * code_bytes
    body = b"".join(
        b"<%0*X> <%s>\n" % (digits, code, text.encode("utf-16-be").hex().upper().encode())
        for code, text in pairs
    )
    data = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n/CMapName /Test def /CMapType 2 def\n"
        b"1 begincodespacerange\n<%s> <%s>\nendcodespacerange\n%d beginbfchar\n%sendbfchar\n"
        b"endcmap CMapName currentdict /CMap defineresource pop end end"
        % (b"0" * digits, b"F" * digits, len(pairs), body)
    )
    return b"<< /Length %d >>\nstream\n%s\nendstream" % (len(data), data)


def cjk_layer_pdf(path: Path, lines: list[str]) -> Path:
    """A page whose text is drawn with a two-byte font (Type0, Identity-H: as CJK PDFs are made) whose
    /ToUnicode says what each glyph is; the font itself is not embedded (the layer is what is tested), so
    no CJK font is needed. A glyph may stand for several characters ("e" + combining acute, as some
    producers write them)."""
    glyphs = sorted({g for line in lines for g in _glyphs(line)} - {" "})
    code = {g: i + 1 for i, g in enumerate(glyphs)}
    code[" "] = 0
    ops = b"".join(
        b"BT /F1 20 Tf 56 %d Td <%s> Tj ET\n"
        % (760 - 40 * n, b"".join(b"%04X" % code[g] for g in _glyphs(line)))
        for n, line in enumerate(lines)
    )
    font = (
        b"<< /Type /Font /Subtype /Type0 /BaseFont /TestCJK /Encoding /Identity-H /DescendantFonts [4 0 R]"
        b" /ToUnicode 5 0 R >>"
    )
    descendant = (
        b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /TestCJK /CIDSystemInfo << /Registry (Adobe)"
        b" /Ordering (Identity) /Supplement 0 >> /FontDescriptor 6 0 R /DW 1000 /CIDToGIDMap /Identity >>"
    )
    descriptor = (
        b"<< /Type /FontDescriptor /FontName /TestCJK /Flags 4 /FontBBox [0 -200 1000 900] /ItalicAngle 0"
        b" /Ascent 880 /Descent -120 /CapHeight 700 /StemV 80 >>"
    )
    cmap = to_unicode(sorted((c, g) for g, c in code.items()), 2)
    return font_page_pdf(path, font, ops, descendant, cmap, descriptor)


def _glyphs(line: str) -> list[str]:
    # a letter followed by combining marks is one glyph (written decomposed in the CMap)
    return re.findall(r".[\u0300-\u036f]*", line)


#: what the broken-layer pages show (visible, legible Helvetica) while their layers say something else
BROKEN_TEXT = "Quarterly revenue grew twelve percent"


def garbage_to_unicode_pdf(path: Path) -> Path:
    """Helvetica drawn right, but a /ToUnicode that maps every code to a private-use character: the layer
    is garbage, the page legible."""
    text = BROKEN_TEXT.encode()
    cmap = to_unicode([(c, chr(0xE000 + c)) for c in sorted(set(text))], 1)
    font = (
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding /ToUnicode 4 0 R >>"
    )
    return font_page_pdf(path, font, b"BT /F1 28 Tf 56 700 Td (%s) Tj ET\n" % text, cmap)


def unmapped_pdf(path: Path) -> Path:
    """A Type3 font whose glyphs are named /g1, /g2, ... and no /ToUnicode: pdfium can map no glyph to a
    character (FPDFText_HasUnicodeMapError) and gives the raw codes, here those of ASCII letters: a layer
    of letters that spell nothing, which only the unicode-map check sees through."""
    first, count = 65, 26
    names = b" ".join(b"/g%d" % i for i in range(count))
    procs = b" ".join(b"/g%d 4 0 R" % i for i in range(count))
    font = (
        b"<< /Type /Font /Subtype /Type3 /FontBBox [0 0 750 750] /FontMatrix [0.001 0 0 0.001 0 0]"
        b" /CharProcs << %s >> /Encoding << /Type /Encoding /Differences [%d %s] >> /FirstChar %d"
        b" /LastChar %d /Widths [%s] >>"
        % (procs, first, names, first, first + count - 1, b" ".join([b"800"] * count))
    )
    glyph = b"1000 0 0 0 750 750 d1 0 0 600 700 re f"
    ops = b"BT /F1 24 Tf 56 700 Td (QXZRT PLMKW) Tj ET\nBT /F1 24 Tf 56 660 Td (GHVBN JYUIO) Tj ET\n"
    return font_page_pdf(path, font, ops, b"<< /Length %d >>\nstream\n%s\nendstream" % (len(glyph), glyph))


def joined_pdf(path: Path, parts: list[Path]) -> Path:
    """One PDF of the pages of ``parts``, in order."""
    out = pdfium.PdfDocument.new()
    for part in parts:
        source = pdfium.PdfDocument(part)
        out.import_pages(source)
        source.close()
    out.save(path)
    out.close()
    return path


def raw_layer(path: Path, page: int = 1) -> str:
    """The page's text layer as pdfium gives it, unchecked (to show what the detection throws away)."""
    pdf = pdfium.PdfDocument(path)
    try:
        return str(pdf[page - 1].get_textpage().get_text_bounded())
    finally:
        pdf.close()


# -- renderers -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ocr_engine() -> None:
    """OCR's engine must be here: the suite's set-up installs it."""
    reason = _ocr.available()
    assert reason is None, f"OCR cannot run: {reason}; `make setup` installs it"


@pytest.fixture(scope="module")
def layer_only() -> Iterator[Renderer]:
    with Renderer(target_pixels=TARGET_PIXELS, text=True, ocr="off") as r:
        yield r


@pytest.fixture(scope="module")
def auto(ocr_engine: None) -> Iterator[Renderer]:
    with Renderer(target_pixels=TARGET_PIXELS, text=True, ocr="auto") as r:
        yield r


@pytest.fixture(scope="module")
def always(ocr_engine: None) -> Iterator[Renderer]:
    with Renderer(target_pixels=TARGET_PIXELS, text=True, ocr="on") as r:
        yield r


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scan_pdf(tmp_path_factory.mktemp("scan") / "scan.pdf")


# -- the text layer ----------------------------------------------------------------------------------------


def test_text_layer_comes_in_reading_order(tmp_path: Path, layer_only: Renderer) -> None:
    path = make_text_pdf(tmp_path / "book.pdf", 2, lines=6)
    pages = list(layer_only.pages(path))
    for number, page in enumerate(pages, start=1):
        assert isinstance(page, RenderedPage) and page.text_from == "pdf"
        expected = [
            f"Page {number}, line {line}: the quick brown fox jumps over the lazy dog."
            for line in range(1, 7)
        ]
        assert page.text == "\n".join(expected)


def test_a_word_hyphenated_across_lines_comes_out_whole(tmp_path: Path, layer_only: Renderer) -> None:
    path = make_pages_pdf(
        tmp_path / "hyphen.pdf", [["The visual document retrie-", "val pipeline reads pages."]]
    )
    assert "\x02" in raw_layer(path)  # pdfium's mark of the joined hyphenation
    page = one(list(layer_only.pages(path)))
    assert page.text == "The visual document retrieval pipeline reads pages."


def test_unicode_and_cjk_round_trip(tmp_path: Path, layer_only: Renderer) -> None:
    lines = [
        "Ünïcödé café naïve façade",
        "中文文本 日本語のテキスト 한국어",
        "𠀋 𪚲 cafe\u0301 Crème brûle\u0301e",  # CJK beyond the BMP; "e" + combining acute, to be composed
    ]
    path = cjk_layer_pdf(tmp_path / "cjk.pdf", lines)
    page = one(list(layer_only.pages(path)))
    assert page.text == unicodedata.normalize("NFC", "\n".join(lines))
    assert page.text is not None and "café" in page.text.split("\n")[2]  # composed: U+00E9
    assert page.text_from == "pdf"
    # a simple font's accents (WinAnsi) too
    latin = make_pages_pdf(tmp_path / "latin.pdf", [["Ünïcödé façade — naïve € 10 ½"]])
    assert one(list(layer_only.pages(latin))).text == "Ünïcödé façade — naïve € 10 ½"


def test_cjk_in_an_embedded_font(tmp_path: Path, layer_only: Renderer) -> None:
    if not CJK_FONT.is_file():
        pytest.skip(f"needs the CJK font {CJK_FONT} (Debian: apt-get install {CJK_PACKAGE})")
    lines = ["中文文本 日本語のテキスト", "한국어 Ünïcödé"]
    path = tmp_path / "embedded.pdf"
    pdf = pdfium.PdfDocument.new()
    page = pdf.new_page(595, 842)
    data = CJK_FONT.read_bytes()
    buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    # pdfium embeds the font (a TrueType collection: its first face) with a /ToUnicode of its own making
    font = pdfium_c.FPDFText_LoadFont(pdf.raw, buffer, len(data), pdfium_c.FPDF_FONT_TRUETYPE, True)
    assert font, "pdfium could not load the font"
    for n, line in enumerate(lines):
        obj = pdfium_c.FPDFPageObj_CreateTextObj(pdf.raw, font, 24.0)
        text = ctypes.create_string_buffer((line + "\0").encode("utf-16-le"))
        assert pdfium_c.FPDFText_SetText(obj, ctypes.cast(text, pdfium_c.FPDF_WIDESTRING))
        pdfium_c.FPDFPageObj_Transform(obj, 1, 0, 0, 1, 56, 760 - 40 * n)
        pdfium_c.FPDFPage_InsertObject(page.raw, obj)
    assert pdfium_c.FPDFPage_GenerateContent(page.raw)
    pdf.save(path)
    pdf.close()
    rendered = one(list(layer_only.pages(path)))
    assert rendered.text == "\n".join(lines) and rendered.text_from == "pdf"
    low = rendered.image.convert("L").getextrema()[0]
    assert isinstance(low, int) and low < 100, "the glyphs were drawn"


def test_text_is_cleaned() -> None:
    raw = "  a\r\nb\x00c\x07\x1b\r\n\r\n\r\n\r\nd  \x0ce\u0301\u2028\tf \x85g\r\n\r\n"
    assert w.clean_text(raw, 100) == "a\nbc\n\nd\né\n\tf\ng"


def test_long_text_is_cut_at_a_whitespace(tmp_path: Path) -> None:
    path = make_text_pdf(tmp_path / "long.pdf", 1, lines=40)
    with Renderer(target_pixels=TARGET_PIXELS, text=True, text_limit=1000) as short:
        cut = one(list(short.pages(path))).text
    with Renderer(target_pixels=TARGET_PIXELS, text=True) as full_renderer:
        full = one(list(full_renderer.pages(path))).text
    assert cut is not None and full is not None
    assert 900 <= len(cut) <= 1000 and full.startswith(cut) and full[len(cut)].isspace()
    assert w.cut_text("x" * 50, 20) == "x" * 20  # one long run: cut at the limit


def test_without_text_nothing_is_extracted(tmp_path: Path) -> None:
    path = make_text_pdf(tmp_path / "plain.pdf", 1, lines=3)
    with Renderer(target_pixels=TARGET_PIXELS, ocr="on") as plain:  # OCR means nothing without text
        page = one(list(plain.pages(path)))
    assert page.text is None and page.text_from is None


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="ocr must be one of off, auto, on"):
        Renderer(target_pixels=TARGET_PIXELS, text=True, ocr="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="text_limit must be positive"):
        Renderer(target_pixels=TARGET_PIXELS, text=True, text_limit=0)


# -- broken layers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make", [garbage_to_unicode_pdf, unmapped_pdf], ids=["garbage-tounicode", "no-unicode"]
)
def test_a_broken_layer_is_treated_as_missing(
    make: Callable[[Path], Path], tmp_path: Path, layer_only: Renderer
) -> None:
    path = make(tmp_path / "broken.pdf")
    assert raw_layer(path).strip(), "the layer has characters: without the detection they would be kept"
    page = one(list(layer_only.pages(path)))
    assert page.text is None and page.text_from is None
    (text,) = list(layer_only.texts(layer_only.open(path)))
    assert text == ExtractedText(1, None, None)


def test_a_broken_layer_is_read_by_ocr(tmp_path: Path, auto: Renderer) -> None:
    path = garbage_to_unicode_pdf(tmp_path / "broken.pdf")
    page = one(list(auto.pages(path)))
    assert page.text_from == "ocr"
    assert words(BROKEN_TEXT) <= words(page.text)


def test_broken_layer_thresholds() -> None:
    contents = "Inhalt\n1.1 Topologische Räume . . . . . . . . . . . . . . . 2\n1.2 Metrik . . . . . . 6"
    assert w.layer_problem(contents, 0, 40) is None  # dot leaders count once
    assert w.layer_problem("habibi حبيبي ϲΒϴΒ", 5, 24) is None  # a few unmapped glyphs: the layer stays
    assert "unicode mapping" in (w.layer_problem("abcdefgh", 3, 8) or "")
    assert "private-use" in (w.layer_problem("\ue001\ue002\ue003 ab", 0, 5) or "")
    assert "U+FFFD" in (w.layer_problem("\ufffd\ufffd ok", 0, 4) or "")
    assert "letters or digits" in (w.layer_problem("∑∫≈≠±§¶†‡•√∞∂∆∏ ab", 0, 17) or "")
    assert w.layer_problem("— 3 —", 0, 3) is None and w.layer_problem("• ·", 0, 2) == "no letter or digit"


def test_real_layers_are_not_taken_for_broken(layer_only: Renderer) -> None:
    """Every page of the real-world PDFs kept with the tests that has a text layer keeps it."""
    checked = 0
    for row in manifest_rows(DOCUMENTS):
        if row["expected"] != "ok" or not row["file"].endswith(".pdf"):
            continue
        path = DOCUMENTS / row["file"]
        for item in layer_only.texts(layer_only.open(path)):
            assert isinstance(item, ExtractedText)
            has_layer = any(c.isalnum() for c in raw_layer(path, item.number))
            assert (item.text_from == "pdf") == has_layer, (row["file"], item.number, item.text)
            checked += has_layer
    assert checked >= 10


# -- OCR -------------------------------------------------------------------------------------------------


def test_a_scanned_page_is_read_by_ocr_when_it_is_on(
    scan: Path, layer_only: Renderer, auto: Renderer, always: Renderer
) -> None:
    for renderer in (auto, always):
        page = one(list(renderer.pages(scan)))
        assert page.text_from == "ocr", renderer.ocr
        assert words(" ".join(SCAN_LINES)) <= words(page.text)
        assert page.text is not None and len(page.text.split("\n")) >= len(SCAN_LINES)
    page = one(list(layer_only.pages(scan)))
    assert page.text is None and page.text_from is None


def test_an_image_file_is_read_by_ocr(tmp_path: Path, layer_only: Renderer, auto: Renderer) -> None:
    path = tmp_path / "scan.png"
    scan_image(SCAN_LINES).save(path)
    page = one(list(auto.pages(path)))
    assert page.text_from == "ocr" and words(" ".join(SCAN_LINES)) <= words(page.text)
    assert one(list(layer_only.pages(path))).text is None


def test_ocr_on_replaces_the_layer(tmp_path: Path, auto: Renderer, always: Renderer) -> None:
    lines = ["Invoices are due within thirty days", "Shipping containers leave from Rotterdam"]
    path = make_pages_pdf(tmp_path / "layer.pdf", [lines])
    assert one(list(auto.pages(path))).text_from == "pdf"
    page = one(list(always.pages(path)))
    assert page.text_from == "ocr" and words(" ".join(lines)) <= words(page.text)


def test_ocr_reads_the_page_not_the_models_small_image(tmp_path: Path, ocr_engine: None) -> None:
    # at 40,000 pixels for the model, an A4 page's 12-pt text is 3 px tall: unreadable; OCR reads its own
    lines = ["Invoices are due within thirty days", "Shipping containers leave from Rotterdam"]
    pdf = make_pages_pdf(tmp_path / "small.pdf", [lines])
    png = tmp_path / "small.png"
    scan_image(lines, size=(2480, 3508), font_px=40).save(png)  # A4 at 300 dpi
    with Renderer(target_pixels=40_000, text=True, ocr="on") as tiny:
        for path in (pdf, png):
            page = one(list(tiny.pages(path)))
            assert page.image.width * page.image.height <= 4 * 40_000
            assert page.text_from == "ocr" and words(" ".join(lines)) <= words(page.text), path.name


def test_texts_give_what_pages_give(tmp_path: Path, scan: Path, ocr_engine: None) -> None:
    layer = make_pages_pdf(tmp_path / "layer.pdf", [["Invoices are due within thirty days"]])
    broken = garbage_to_unicode_pdf(tmp_path / "broken.pdf")
    mixed = joined_pdf(tmp_path / "mixed.pdf", [layer, scan, broken, layer])
    with Renderer(target_pixels=TARGET_PIXELS, text=True, ocr="auto", workers=2) as two:
        pages = list(two.pages(mixed))
        texts = list(two.texts(two.open(mixed)))
        later = list(two.texts(mixed, first=3))
    assert all(isinstance(p, RenderedPage) for p in pages)
    assert texts == [
        ExtractedText(p.number, p.text, p.text_from) for p in pages if isinstance(p, RenderedPage)
    ]
    assert [t.text_from for t in texts if isinstance(t, ExtractedText)] == ["pdf", "ocr", "ocr", "pdf"]
    assert later == texts[2:]


def test_a_missing_engine_turns_ocr_off_with_one_warning(
    tmp_path: Path, scan: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract on it
    with (
        caplog.at_level(logging.WARNING, logger="docvec"),
        Renderer(target_pixels=TARGET_PIXELS, text=True, ocr="auto") as renderer,
    ):
        for _ in range(2):
            assert one(list(renderer.pages(scan))).text is None
            assert list(renderer.texts(scan)) == [ExtractedText(1, None, None)]
    assert "apt-get install tesseract-ocr" in (renderer.ocr_missing or "")
    warnings = [r.getMessage() for r in caplog.records if "OCR" in r.getMessage()]
    assert warnings == [f"OCR is off: {renderer.ocr_missing}"]


def fake_tesseract(folder: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``tesseract`` in ``folder``, first on the PATH, that lists English and does ``body`` (shell) for
    anything else."""
    folder.mkdir(exist_ok=True)
    exe = folder / "tesseract"
    exe.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--list-langs" ]; then\n'
        "  echo 'List of available languages in \"/x/\" (1):'; echo eng; exit 0\n"
        "fi\n"
        f"{body}\n"
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def test_a_failing_engine_costs_the_text_not_the_page(
    tmp_path: Path, scan: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    failing = 'printf %s "$OMP_THREAD_LIMIT" > "${0%/*}/threads"\necho "Error: cannot read the image" >&2'
    bin_dir = fake_tesseract(tmp_path / "bin", f"{failing}\nexit 1", monkeypatch)
    layer = make_pages_pdf(tmp_path / "layer.pdf", [["Invoices are due within thirty days"]])
    with (
        caplog.at_level(logging.WARNING, logger="docvec"),
        Renderer(target_pixels=TARGET_PIXELS, text=True, ocr="on") as renderer,
    ):
        assert renderer.ocr_missing is None
        page = one(list(renderer.pages(scan)))
        assert page.text is None and page.text_from is None
        kept = one(list(renderer.pages(layer)))  # OCR failed: the layer rather than nothing
        assert kept.text == "Invoices are due within thirty days" and kept.text_from == "pdf"
    assert (bin_dir / "threads").read_text() == "1"  # one thread: the embedder has the cores
    failures = [r.getMessage() for r in caplog.records if "OCR:" in r.getMessage()]
    assert len(failures) == 2
    assert failures[0].endswith("page 1: OCR: tesseract failed (exit code 1): Error: cannot read the image")


def test_ocr_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ocr_engine: None) -> None:
    assert _ocr.available() is None
    text = _ocr.read_text(scan_image(SCAN_LINES), dpi=200)
    assert text.split("\n")[0] == SCAN_LINES[0]
    assert words(" ".join(SCAN_LINES)) <= words(text)
    assert _ocr.read_text(Image.new("L", (400, 300), 255)) == ""

    fake_tesseract(tmp_path / "slow", "sleep 5", monkeypatch)
    monkeypatch.setattr(_ocr, "TIMEOUT_S", 0.5)
    with pytest.raises(_ocr.OcrError, match=r"tesseract took over 0.5 s"):
        _ocr.read_text(scan_image(["slow"]))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert "not installed (Debian: apt-get install tesseract-ocr tesseract-ocr-eng)" in (
        _ocr.available() or ""
    )
    with pytest.raises(_ocr.OcrError, match="not installed"):
        _ocr.read_text(scan_image(["gone"]))
