"""The documents tests read: the small real-world files kept under ``tests/data/documents`` and the ones
generated at test time, plus an opt-in corpus.

Everything the default suite needs lives in the repository or is made here, so ``make test`` passes on a
clone with nothing beside it. A larger real-world corpus (a folder with a MANIFEST.tsv of the same
columns) runs only when ``DOCVEC_TEST_CORPUS`` names its folder.
"""

from __future__ import annotations

import csv
import os
import struct
import zlib
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


def make_text_pdf(path: Path, pages: int, *, lines: int = 40, xfa: bool = False) -> Path:
    """A PDF of ``pages`` A4 pages of text (Helvetica) and a filled box, written byte by byte; with
    ``xfa``, its form is an XFA form too (as Acrobat-made forms are), which PDFium renders without.

    Stands in for a long typeset book: every page has text to lay out with a font, so rendering it costs
    what rendering such a book costs; writing it takes linear time (PDFium's own page insertion does not:
    30 s for 2,000 pages).
    """
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for number in range(1, pages + 1):
        text = b"".join(
            b"BT /F1 11 Tf 56 %d Td (Page %d, line %d: the quick brown fox jumps over the lazy dog.) Tj ET\n"
            % (780 - line * 18, number, line + 1)
            for line in range(lines)
        )
        ops = text + b"0.8 0.2 0.2 rg 56 40 200 30 re f\n"
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(ops), ops))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595.3 841.9] /Contents %d 0 R"
            b" /Resources << /Font << /F1 3 0 R >> >> >>" % len(objects)
        )
        kids.append(len(objects))
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
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    kids = []
    for lines in pages:
        ops = b"".join(
            b"BT /F1 12 Tf 56 %d Td (%s) Tj ET\n"
            % (
                780 - i * 20,
                line.encode("cp1252").replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)"),
            )
            for i, line in enumerate(lines)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(ops), ops))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595.3 841.9] /Contents %d 0 R"
            b" /Resources << /Font << /F1 3 0 R >> >> >>" % len(objects)
        )
        kids.append(len(objects))
    return write_pdf(path, objects, kids)


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
