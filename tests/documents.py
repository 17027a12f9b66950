"""The documents tests read: the small real-world files kept under ``tests/data/documents`` and the ones
generated at test time, plus an opt-in corpus.

Everything the default suite needs lives in the repository or is made here, so ``make test`` passes on a
clone with nothing beside it. A larger real-world corpus (a folder with a MANIFEST.tsv of the same
columns) runs only when ``DOCVEC_TEST_CORPUS`` names its folder.
"""

from __future__ import annotations

import csv
import os
import random
import re
import struct
import zlib
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

#: the real-world documents shipped with the tests (origin and licence in SOURCES.md beside them)
DOCUMENTS = Path(__file__).resolve().parent / "data" / "documents"
#: names the folder of the extended corpus (a MANIFEST.tsv and its files); unset: those tests skip
CORPUS_ENV = "DOCVEC_TEST_CORPUS"

#: a PDF's catalog, object 1 (its page tree is object 2)
CATALOG = b"<< /Type /Catalog /Pages 2 0 R >>"
#: the resources of a page whose text is in the font of object 3
FONT_3 = b"<< /Font << /F1 3 0 R >> >>"


def extended_corpus() -> Path | None:
    """The folder ``DOCVEC_TEST_CORPUS`` names, or ``None`` when it is unset."""
    folder = os.environ.get(CORPUS_ENV)
    return Path(folder) if folder else None


def manifest_rows(folder: Path) -> list[dict[str, str]]:
    """The rows of ``folder/MANIFEST.tsv``: file, bytes, sha256, source, expected, pages, note."""
    with open(folder / "MANIFEST.tsv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def make_text_pdf(path: Path, pages: int, *, lines: int = 40, xfa: bool = False) -> Path:
    """A PDF of ``pages`` A4 pages of text (Helvetica) and a filled box, written byte by byte; with
    ``xfa``, its form is an XFA form too (as Acrobat-made forms are), which PDFium renders without.

    Stands in for a long typeset book: every page has text to lay out with a font, so rendering it costs
    what rendering such a book costs; writing it takes linear time (PDFium's own page insertion does not:
    30 s for 2,000 pages).
    """
    objects = [CATALOG, b"", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    line = b"BT /F1 11 Tf 56 %d Td (Page %d, line %d: the quick brown fox jumps over the lazy dog.) Tj ET\n"
    contents = [
        b"".join(line % (780 - n * 18, number, n + 1) for n in range(lines))
        + b"0.8 0.2 0.2 rg 56 40 200 30 re f\n"
        for number in range(1, pages + 1)
    ]
    kids = add_pages(objects, contents)
    if xfa:
        packet = b'<xdp:xdp xmlns:xdp="http://ns.adobe.com/xdp/"><template/></xdp:xdp>'
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(packet), packet))
        form = b"/AcroForm << /Fields [] /XFA %d 0 R >>" % len(objects)
        objects[0] = b"<< /Type /Catalog /Pages 2 0 R %s >>" % form
    return write_pdf(path, objects, kids)


def make_pages_pdf(path: Path, pages: list[list[str]]) -> Path:
    """A PDF of A4 pages, each with its lines of text in Helvetica (WinAnsi: Latin-1 letters, accents
    included), one line under the other: a text layer whose words are known."""
    objects = [
        CATALOG,
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    escaped = [
        [
            ln.encode("cp1252").replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
            for ln in lines
        ]
        for lines in pages
    ]
    contents = [
        b"".join(b"BT /F1 12 Tf 56 %d Td (%s) Tj ET\n" % (780 - i * 20, line) for i, line in enumerate(lines))
        for lines in escaped
    ]
    return write_pdf(path, objects, add_pages(objects, contents))


def slow_pdf(path: Path, pages: int, fills: int = 100) -> Path:
    """A PDF whose pages are slow to render (~0.1 s a page per 100 fills): translucent full-page fills."""
    rng = random.Random(0)
    contents = [
        b"/GS0 gs\n"
        + b"".join(
            b"%.2f %.2f %.2f rg 0 0 595 842 re f\n" % (rng.random(), rng.random(), rng.random())
            for _ in range(fills)
        )
        for _ in range(pages)
    ]
    objects = [CATALOG, b""]
    kids = add_pages(
        objects, contents, resources=b"<< /ExtGState << /GS0 << /ca 0.02 >> >> >>", media_box=b"0 0 595 842"
    )
    return write_pdf(path, objects, kids)


def add_pages(
    objects: list[bytes],
    contents: list[bytes],
    *,
    resources: bytes = FONT_3,
    media_box: bytes = b"0 0 595.3 841.9",
) -> list[int]:
    """Append a page (its content stream, then the page object) to ``objects`` for each of ``contents``,
    an A4 page by default; the page objects' numbers, for :func:`write_pdf`."""
    kids = []
    for ops in contents:
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(ops), ops))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [%s] /Contents %d 0 R /Resources %s >>"
            % (media_box, len(objects), resources)
        )
        kids.append(len(objects))
    return kids


def write_pdf(path: Path, objects: list[bytes], kids: list[int]) -> Path:
    """Write a PDF of ``objects`` (object 1 the catalog, object 2 left for the page tree, which is made
    here from the page objects' numbers ``kids``), with its cross-reference table."""
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (i, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def make_tiff(path: Path, sizes: list[tuple[int, int]]) -> Path:
    """A multi-page TIFF, one frame of each size, each a different flat colour."""
    frames = [Image.new("RGB", size, (40 * i % 256, 120, 200)) for i, size in enumerate(sizes, start=1)]
    frames[0].save(path, save_all=True, append_images=frames[1:], compression="tiff_lzw")
    return path


def png_header_only(path: Path, width: int, height: int, *, rgba: bool = False) -> Path:
    """A PNG that declares ``width`` x ``height`` pixels and holds none: a decompression bomb's header."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6 if rgba else 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    )
    return path


# -- text layers and scans ----------------------------------------------------------------------------------

#: what the scanned pages say (large, clean type: OCR reads every word)
SCAN_LINES = [
    "Quarterly revenue grew twelve percent",
    "The invoice total is due in March",
    "Northwind containers arrive on Monday",
]


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
    objects = [CATALOG, b"", font, *extra]
    return write_pdf(path, objects, add_pages(objects, [ops]))


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


#: a word no other page has: a product code, as a user would search for one
RARE = "ZQ7XK42"
#: the first lines of the filler documents (:func:`filler_pdfs`), one a document
FILLER = [
    "Quarterly report of the northern region",
    "Revenue by product line and by month",
    "Minutes of the board meeting in March",
    "Travel expenses and their receipts",
    "Warranty terms for the service contract",
    "Delivery schedule for spare parts",
    "Staff handbook, chapter on holidays",
    "Invoice for consulting services rendered",
    "Safety instructions for the workshop",
    "Budget plan for the coming year",
    "Letter to the shareholders",
    "Inventory count of the warehouse",
]


def filler_pdfs(folder: Path, rare_on: int) -> list[Path]:
    """One single-page PDF per :data:`FILLER` line, ``doc-00.pdf`` on; the page ``rare_on`` also holds the
    rare code :data:`RARE`."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, line in enumerate(FILLER):
        lines = [line, f"Document number {i + 1} of the archive, filed by the office."]
        if i == rare_on:
            lines.append(f"Part code {RARE} is listed here.")
        paths.append(make_pages_pdf(folder / f"doc-{i:02d}.pdf", [lines]))
    return paths
