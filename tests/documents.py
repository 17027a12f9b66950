"""The documents tests read: the small real-world files kept under ``tests/data/documents`` and the ones
generated at test time, plus the opt-in shared corpus.

Everything the default suite needs lives in the repository or is made here, so ``make test`` passes on a
clone with nothing beside it. The larger real-world corpus (``../shared/corpus`` for developers) runs
only when ``DOCVEC_TEST_CORPUS`` names its folder.
"""

from __future__ import annotations

import csv
import ctypes
import os
from pathlib import Path

from PIL import Image

#: the real-world documents shipped with the tests (origin and licence in SOURCES.md beside them)
DOCUMENTS = Path(__file__).resolve().parent / "data" / "documents"
#: names the folder of the extended corpus (a MANIFEST.tsv and its files); unset: those tests skip
CORPUS_ENV = "DOCVEC_TEST_CORPUS"


def extended_corpus() -> Path | None:
    """The folder ``DOCVEC_TEST_CORPUS`` names, or ``None`` when it is unset."""
    folder = os.environ.get(CORPUS_ENV)
    return Path(folder) if folder else None


def manifest_rows(folder: Path) -> list[dict[str, str]]:
    """The rows of ``folder/MANIFEST.tsv``: file, bytes, sha256, source, expected, pages, note."""
    with open(folder / "MANIFEST.tsv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def make_text_pdf(path: Path, pages: int, *, lines: int = 40) -> Path:
    """A PDF of ``pages`` A4 pages of vector text and a filled box, written with PDFium (pypdfium2).

    Stands in for a long typeset book: every page has real text objects and a font to lay out, so
    rendering it costs what rendering such a book costs.
    """
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    pdf = pdfium.PdfDocument.new()
    try:
        for number in range(1, pages + 1):
            page = pdf.new_page(595.3, 841.9)
            for line in range(lines):
                obj = raw.FPDFPageObj_NewTextObj(pdf.raw, b"Helvetica", 11.0)
                text = f"Page {number}, line {line + 1}: the quick brown fox jumps over the lazy dog."
                utf16 = (text + "\0").encode("utf-16-le")
                buffer = ctypes.create_string_buffer(utf16, len(utf16))
                raw.FPDFText_SetText(obj, ctypes.cast(buffer, raw.FPDF_WIDESTRING))
                raw.FPDFPageObj_Transform(obj, 1, 0, 0, 1, 56, 780 - line * 18)
                raw.FPDFPage_InsertObject(page.raw, obj)
            box = raw.FPDFPageObj_CreateNewRect(56, 40, 200, 30)
            raw.FPDFPageObj_SetFillColor(box, 200, 50, 50, 255)
            raw.FPDFPath_SetDrawMode(box, raw.FPDF_FILLMODE_ALTERNATE, 0)
            raw.FPDFPage_InsertObject(page.raw, box)
            raw.FPDFPage_GenerateContent(page.raw)
            page.close()
        pdf.save(path)
    finally:
        pdf.close()
    return path


def make_tiff(path: Path, sizes: list[tuple[int, int]]) -> Path:
    """A multi-page TIFF, one frame of each size, each a different flat colour."""
    frames = [Image.new("RGB", size, (40 * i % 256, 120, 200)) for i, size in enumerate(sizes, start=1)]
    frames[0].save(path, save_all=True, append_images=frames[1:], compression="tiff_lzw")
    return path
