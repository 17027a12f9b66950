"""Regenerates the sample documents shipped with docvec (our own work, Apache-2.0 like the code).

python -m docvec.samples.make_samples

The PDFs are born digital, as most PDFs are: their words are a text layer (PDF's standard Helvetica, drawn
with PDFium's page-object API through pypdfium2, which docvec renders with anyway), so the demo finds them
on any machine; the chart is also a PNG, an image whose words only OCR reads (where tesseract is installed).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image, ImageDraw

HERE = Path(__file__).parent

A4 = (595, 842)  # points
_BLUE = (40, 90, 200)
#: the chart: four quarters' revenue (kEUR) as bar heights in points
_QUARTERS = (220, 310, 270, 400)


class _Page:
    """One PDF page drawn in points from the top left, as the PNG is in pixels."""

    def __init__(self, pdf: pdfium.PdfDocument, font: pdfium_c.FPDF_FONT) -> None:
        self.pdf, self.font = pdf, font
        self.page = pdf.new_page(*A4)

    def _add(self, obj: pdfium_c.FPDF_PAGEOBJECT) -> None:
        self.page.insert_obj(pdfium.PdfObject(obj, pdf=self.pdf))

    def text(self, x: float, y: float, words: str, size: float = 11) -> None:
        obj = pdfium_c.FPDFPageObj_CreateTextObj(self.pdf.raw, self.font, size)
        utf16 = ctypes.create_string_buffer((words + "\0").encode("utf-16-le"))
        pdfium_c.FPDFText_SetText(obj, ctypes.cast(utf16, pdfium_c.FPDF_WIDESTRING))
        pdfium_c.FPDFPageObj_Transform(obj, 1, 0, 0, 1, x, A4[1] - y - size)
        self._add(obj)

    def rect(self, x0: float, y0: float, x1: float, y1: float, rgb: tuple[int, int, int]) -> None:
        obj = pdfium_c.FPDFPageObj_CreateNewRect(x0, A4[1] - y1, x1 - x0, y1 - y0)
        pdfium_c.FPDFPageObj_SetFillColor(obj, *rgb, 255)
        pdfium_c.FPDFPath_SetDrawMode(obj, pdfium_c.FPDF_FILLMODE_WINDING, False)
        self._add(obj)

    def line(self, x0: float, y0: float, x1: float, y1: float, width: float = 2) -> None:
        obj = pdfium_c.FPDFPageObj_CreateNewPath(x0, A4[1] - y0)
        pdfium_c.FPDFPath_LineTo(obj, x1, A4[1] - y1)
        pdfium_c.FPDFPageObj_SetStrokeColor(obj, 0, 0, 0, 255)
        pdfium_c.FPDFPageObj_SetStrokeWidth(obj, width)
        pdfium_c.FPDFPath_SetDrawMode(obj, 0, True)
        self._add(obj)


@contextmanager
def _pdf(path: Path) -> Iterator[Callable[[], _Page]]:
    """A new PDF saved to ``path`` at the block's end; the block adds pages with the function it gets."""
    pdf = pdfium.PdfDocument.new()
    font = pdfium_c.FPDFText_LoadStandardFont(pdf.raw, b"Helvetica")
    # a page's drawing is written into the file from its own handle (gen_content), before it is let go
    pages: list[_Page] = []

    def new_page() -> _Page:
        pages.append(_Page(pdf, font))
        return pages[-1]

    try:
        yield new_page
        for p in pages:
            p.page.gen_content()
        pdf.save(path)
    finally:
        pdfium_c.FPDFFont_Close(font)
        pdf.close()


def invoice(page: _Page) -> None:
    page.text(60, 60, "INVOICE  No. 2026-114", 16)
    page.text(60, 90, "Northwind Consulting, 12 Harbour Street")
    for i, (item, price) in enumerate(
        [("Consulting", "1,200.00"), ("Hosting", "240.00"), ("Support", "90.00")]
    ):
        page.text(60, 160 + 30 * i, item)
        page.text(440, 160 + 30 * i, price)
    page.line(60, 260, 535, 260)
    page.text(60, 275, "Total amount due (EUR)", 12)
    page.text(440, 275, "1,530.00", 12)
    page.text(60, 320, "Payment within 30 days to account DE12 3456 7890 1234 5678 90.")


def report_text(page: _Page) -> None:
    page.text(60, 60, "Quarterly report: operations", 16)
    for i in range(30):
        page.text(60, 110 + 22 * i, f"{i + 1}. The cooling system ran at {60 + i % 7}% load in week {i + 1}.")


def report_chart(page: _Page) -> None:
    page.text(60, 60, "Revenue by quarter (kEUR)", 16)
    for i, h in enumerate(_QUARTERS):
        x = 90 + 110 * i
        page.rect(x, 700 - h, x + 70, 700, _BLUE)
        page.text(x + 25, 715, f"Q{i + 1}")
    page.line(70, 700, 540, 700)


def chart_image() -> Image.Image:
    """The chart as a picture: an image file, whose words only OCR reads."""
    img = Image.new("RGB", A4, "white")
    d = ImageDraw.Draw(img)
    d.text((60, 60), "Revenue by quarter (kEUR)", fill="black", font_size=20)
    for i, h in enumerate(_QUARTERS):
        x = 90 + 110 * i
        d.rectangle((x, 700 - h, x + 70, 700), fill=_BLUE)
        d.text((x + 25, 715), f"Q{i + 1}", fill="black", font_size=16)
    d.line((70, 700, 540, 700), fill="black", width=2)
    return img.resize((800, 1132))


def main() -> None:
    with _pdf(HERE / "invoice.pdf") as new_page:
        invoice(new_page())
    with _pdf(HERE / "quarterly-report.pdf") as new_page:
        report_text(new_page())
        report_chart(new_page())
    chart_image().save(HERE / "revenue-chart.png", optimize=True)


if __name__ == "__main__":
    main()
