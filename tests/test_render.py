"""The render stage on real-world documents and on generated edge cases (sizes, frames, crashes, time); then
page text from the render workers: PDF text layers (reading order, unicode, CJK), broken layers treated as
missing, OCR of scans and image files as the setting says, a missing or failing engine, and the text-only
stream :meth:`Renderer.texts`.

OCR needs tesseract (Debian's tesseract-ocr and tesseract-ocr-eng, which ``make setup`` installs); the test
of an embedded CJK font needs WenQuanYi Zen Hei (Debian's fonts-wqy-zenhei) and says so when it is absent.
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import re
import signal
import sys
import time
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
import pytest
from PIL import Image

from docvec import ConfigError, DocvecError, InputError, RenderError
from docvec._errors import RendererStateError
from docvec._model._profiles import JINA_V4
from docvec._render import ExtractedText, _ocr
from docvec._render import _worker as worker
from docvec._render._renderer import (
    DocumentInfo,
    PageFailure,
    RenderedPage,
    Renderer,
    detect_kind,
)

from .documents import (
    CORPUS_ENV,
    DOCUMENTS,
    SCAN_LINES,
    cjk_layer_pdf,
    extended_corpus,
    font_page_pdf,
    make_pages_pdf,
    make_text_pdf,
    manifest_rows,
    png_header_only,
    scan_image,
    scan_pdf,
    slow_pdf,
    to_unicode,
)
from .helpers import BOOK_PAGES

#: the page budget pages are rendered near: jina-embeddings-v4's image area bound
TARGET_PIXELS = JINA_V4.max_pixels
MAX_PIXELS = 4 * TARGET_PIXELS
# Pages PDFium cannot load or render in files that otherwise open (from the manifest's notes).
FAILING_PAGES = {"pdfium__bad_page_type.pdf": {2}, "pdfium__cropped_no_overlap.pdf": {1}}


def _manifest_params() -> list[object]:
    """Every row of the manifest of the documents kept with the tests, then of the extended corpus when
    DOCVEC_TEST_CORPUS names one (a skipped case saying how to run it otherwise)."""
    params: list[object] = [pytest.param(DOCUMENTS, row, id=row["file"]) for row in manifest_rows(DOCUMENTS)]
    corpus = extended_corpus()
    if corpus is None:
        reason = f"the extended corpus runs when {CORPUS_ENV} names its folder (one with a MANIFEST.tsv)"
        params.append(pytest.param(None, {}, id="extended-corpus", marks=pytest.mark.skip(reason=reason)))
    else:
        params += [pytest.param(corpus, row, id=f"extended:{row['file']}") for row in manifest_rows(corpus)]
    return params


@pytest.fixture(scope="module")
def renderer() -> Iterator[Renderer]:
    with Renderer(target_pixels=TARGET_PIXELS) as r:
        yield r


def collect(renderer: Renderer, path: Path, **kwargs: int) -> list[RenderedPage | PageFailure]:
    return list(renderer.pages(path, **kwargs))


def rendered(items: list[RenderedPage | PageFailure]) -> list[RenderedPage]:
    return [p for p in items if isinstance(p, RenderedPage)]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- real-world documents: every row of the manifest ------------------------------------------------


@pytest.mark.parametrize(("folder", "row"), _manifest_params())
def test_manifest_row(folder: Path, row: dict[str, str], renderer: Renderer) -> None:
    path = folder / row["file"]
    expected = row["expected"]
    if expected == "encrypted":
        with pytest.raises(RenderError, match="password") as info:
            collect(renderer, path)
        assert row["file"] in str(info.value)
        with pytest.raises(RenderError, match="encrypted: a user password is required"):
            renderer.open(path)
    elif expected == "empty":
        with pytest.raises(RenderError, match="no pages"):
            collect(renderer, path)
    elif expected == "corrupt" and row["pages"] == "-":
        with pytest.raises(RenderError, match=r"corrupt or not a PDF: data format error \(PDFium error 3\)"):
            renderer.open(path)
        with pytest.raises(RenderError, match="corrupt or not a PDF"):
            collect(renderer, path)
    elif expected == "not-pdf" and detect_kind(path) == "image":
        with Image.open(path) as img:
            frames = getattr(img, "n_frames", 1) if img.format == "TIFF" else 1
            size = img.size
        assert renderer.open(path) == DocumentInfo(path, "image", frames)
        pages = collect(renderer, path)
        assert [p.number for p in pages] == list(range(1, frames + 1))
        assert all(isinstance(p, RenderedPage) and p.size_pt is None for p in pages)
        first = rendered(pages)[0]
        assert first.image.mode == "RGB" and first.image.size == size
    elif expected == "not-pdf":
        assert detect_kind(path) is None
        with pytest.raises(RenderError, match=r"not a document \(neither a PDF nor an image\)"):
            collect(renderer, path)
        with pytest.raises(RenderError, match="not a document"):
            renderer.open(path)
    elif expected in ("ok", "corrupt", "other"):
        count = int(row["pages"])
        assert renderer.open(path) == DocumentInfo(path, "pdf", count)
        pages = collect(renderer, path)
        assert [p.number for p in pages] == list(range(1, count + 1))
        failing = FAILING_PAGES.get(row["file"], set())
        assert {p.number for p in pages if isinstance(p, PageFailure)} == failing
        for page in rendered(pages):
            assert page.image.mode == "RGB"
            assert page.image.width * page.image.height <= MAX_PIXELS
            assert page.size_pt is not None
            w_pt, h_pt = page.size_pt
            # Near the pixel budget whatever the page size: pixels per point = sqrt(target / area).
            scale = math.sqrt(TARGET_PIXELS / (w_pt * h_pt))
            assert page.image.size == (math.ceil(w_pt * scale), math.ceil(h_pt * scale))
    else:
        pytest.fail(f"manifest row with an expectation this test does not know: {row}")


def test_manifest_covers_the_documents(documents: Path) -> None:
    files = {p.name for p in documents.iterdir() if p.name not in ("MANIFEST.tsv", "README.md", "SOURCES.md")}
    assert files == {r["file"] for r in manifest_rows(documents)}
    sources = (documents / "SOURCES.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in sources for name in files), "every file needs its origin and licence"


def test_a4_pages_come_out_near_the_budget(documents: Path, renderer: Renderer) -> None:
    (page,) = collect(renderer, documents / "pysamples__minimal-document.pdf")
    assert isinstance(page, RenderedPage)
    assert page.image.size == (653, 923)
    assert page.size_pt == pytest.approx((595.3, 841.9), abs=0.1)
    # Something was drawn: text is dark on a white page.
    extrema = page.image.convert("L").getextrema()
    assert isinstance(extrema[0], int) and extrema[0] < 50 and extrema[1] == 255


def test_rotated_page_is_landscape(documents: Path, renderer: Renderer) -> None:
    page = next(renderer.pages(documents / "pysamples__habibi-rotated.pdf"))
    assert isinstance(page, RenderedPage)
    assert page.rotation == 90
    assert page.size_pt is not None and page.size_pt[0] > page.size_pt[1]
    assert page.image.width > page.image.height
    assert page.image.size == (923, 653)


def test_failures_name_the_file_and_reason(documents: Path, renderer: Renderer) -> None:
    (ok, bad) = collect(renderer, documents / "pdfium__bad_page_type.pdf")
    assert isinstance(ok, RenderedPage) and ok.image.size[0] < ok.image.size[1]
    assert isinstance(bad, PageFailure) and bad.number == 2 and "cannot load the page" in bad.reason
    (crop,) = collect(renderer, documents / "pdfium__cropped_no_overlap.pdf")
    assert isinstance(crop, PageFailure) and "no visible area" in crop.reason
    with pytest.raises(RenderError) as info:
        renderer.open(documents / "qpdf__empty.pdf")
    assert isinstance(info.value, DocvecError)
    assert info.value.path == str(documents / "qpdf__empty.pdf")
    assert info.value.reason.startswith("no pages")


def test_empty_pdf_after_a_corrupt_one_still_reads_no_pages(documents: Path, renderer: Renderer) -> None:
    # PDFium's last-error code is not reset by a successful load: a zero-page PDF must not inherit the
    # "data format error" of the corrupt file the same worker opened before it.
    with pytest.raises(RenderError, match="corrupt"):
        renderer.open(documents / "pdfium__bug_325_a.pdf")
    with pytest.raises(RenderError, match="no pages"):
        renderer.open(documents / "qpdf__empty.pdf")


def test_first_page_argument(documents: Path, renderer: Renderer) -> None:
    path = documents / "pysamples__pdflatex-4-pages.pdf"
    assert [p.number for p in renderer.pages(path, first=3)] == [3, 4]
    assert list(renderer.pages(path, first=5)) == []
    with pytest.raises(InputError, match="1-based"):
        next(renderer.pages(path, first=0))


def test_file_names_are_passed_through_untouched(tmp_path: Path, documents: Path, renderer: Renderer) -> None:
    data = (documents / "pysamples__pdflatex-4-pages.pdf").read_bytes()
    for name in ("Über straße ✓ (copy), v2.pdf", os.fsdecode(b"latin1-\xe9.pdf")):
        path = tmp_path / name
        path.write_bytes(data)
        assert [p.number for p in renderer.pages(path)] == [1, 2, 3, 4]


def test_missing_file(tmp_path: Path, renderer: Renderer) -> None:
    with pytest.raises(RenderError, match="no such file"):
        renderer.open(tmp_path / "nope.pdf")
    with pytest.raises(RenderError, match="not a file"):
        detect_kind(tmp_path)


# -- detection by content -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"%PDF-1.7\n", "pdf"),
        (b"junk before the header\r\n%PDF-1.4\n", "pdf"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image"),
        (b"II*\x00\x08\x00\x00\x00", "image"),
        (b"MM\x00*\x00\x00\x00\x08", "image"),
        (b"RIFF\x24\x00\x00\x00WEBPVP8 ", "image"),
        (b"BM" + bytes(12) + (40).to_bytes(4, "little"), "image"),
        (b"GIF89a\x01\x00", "image"),
        (b"oops\n", None),
        (b"BM is not a bitmap: just text", None),
        (b"", None),
        (b"PK\x03\x04 a zip, or an XPS", None),
    ],
)
def test_detect_kind_by_content(tmp_path: Path, head: bytes, kind: str | None) -> None:
    path = tmp_path / "file.pdf"  # the extension says PDF; only the content counts
    path.write_bytes(head + bytes(64))
    assert detect_kind(path) == kind


def test_pdf_marker_past_1024_bytes_is_not_a_pdf(tmp_path: Path) -> None:
    path = tmp_path / "late.pdf"
    path.write_bytes(b"x" * 1024 + b"%PDF-1.4\n")
    assert detect_kind(path) is None


# -- page sizes -----------------------------------------------------------------------------------------


def test_absurd_page_sizes_stay_within_the_cap(tmp_path: Path, renderer: Renderer) -> None:
    import pypdfium2 as pdfium

    sizes = [(14400.0, 14400.0), (612.0, 2.0**31), (2.0**31, 2.0**31), (0.5, 0.5), (1.0, 20000.0)]
    pdf = pdfium.PdfDocument.new()
    for width, height in sizes:
        pdf.new_page(width, height).close()
    path = tmp_path / "absurd.pdf"
    pdf.save(path)
    pdf.close()
    pages = collect(renderer, path)
    assert [p.number for p in pages] == [1, 2, 3, 4, 5]
    for page in pages:
        assert isinstance(page, RenderedPage), page
        assert page.image.width * page.image.height <= MAX_PIXELS
    # Normal aspect ratios land near the budget, tiny or huge.
    for page in (pages[0], pages[2], pages[3]):
        assert isinstance(page, RenderedPage)
        assert 0.99 * TARGET_PIXELS <= page.image.width * page.image.height <= MAX_PIXELS


def test_page_scale_never_crosses_the_cap() -> None:
    from docvec._render._worker import _PageFailure, fit_within, page_scale

    for w_pt in (0.01, 1.0, 3.3, 595.3, 14400.0, 2.0**31):
        for h_pt in (0.01, 1.0, 841.9, 99999.7, 2.0**31):
            for target, cap in ((602_112, 4 * 602_112), (1000, 1000), (50, 4000)):
                s = page_scale(w_pt, h_pt, target, cap)
                assert math.ceil(w_pt * s) * math.ceil(h_pt * s) <= cap, (w_pt, h_pt, target)
    for bad in ((0.0, 100.0), (100.0, -1.0), (math.nan, 1.0), (math.inf, 1.0)):
        with pytest.raises(_PageFailure):
            page_scale(*bad, 1000, 4000)
    assert fit_within(100, 50, 10_000) == (100, 50)
    assert fit_within(4000, 3000, 1_200_000) == (1264, 948)
    w, h = fit_within(1, 10**7, 1000)
    assert (w, h) == (1, 1000)


# -- images as documents --------------------------------------------------------------------------------


def test_multiframe_tiff_is_one_page_per_frame(tmp_path: Path, renderer: Renderer) -> None:
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255)]
    frames = [Image.new("RGB", (40 + 10 * i, 30), c) for i, c in enumerate(colours)]
    path = tmp_path / "scan.bin"
    frames[0].save(path, format="TIFF", save_all=True, append_images=frames[1:])
    assert detect_kind(path) == "image"
    assert renderer.open(path).page_count == 3
    pages = rendered(collect(renderer, path))
    assert [p.number for p in pages] == [1, 2, 3]
    assert [p.image.size for p in pages] == [(40, 30), (50, 30), (60, 30)]
    assert [p.image.getpixel((5, 5)) for p in pages] == colours
    assert [p.number for p in renderer.pages(path, first=2)] == [2, 3]


def test_gif_is_its_first_frame(tmp_path: Path, renderer: Renderer) -> None:
    frames = [Image.new("P", (20, 20), i) for i in range(3)]
    for i, frame in enumerate(frames):
        frame.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255] + [0] * 759)
        frame.info["duration"] = 100 + i
    path = tmp_path / "anim.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:])
    (page,) = collect(renderer, path)
    assert isinstance(page, RenderedPage)
    assert page.image.mode == "RGB" and page.image.getpixel((0, 0)) == (255, 0, 0)


def test_exif_orientation_is_applied(tmp_path: Path, renderer: Renderer) -> None:
    img = Image.new("RGB", (200, 100), (255, 255, 255))
    img.paste((255, 0, 0), (0, 0, 20, 20))  # a red mark at the stored top-left
    exif = Image.Exif()
    exif[0x0112] = 6  # displayed rotated 90 degrees clockwise
    path = tmp_path / "photo.jpg"
    img.save(path, exif=exif, quality=95)
    (page,) = collect(renderer, path)
    assert isinstance(page, RenderedPage)
    assert page.image.size == (100, 200)
    pixel = page.image.getpixel((90, 10))  # top-left turns clockwise to top-right
    assert isinstance(pixel, tuple)
    r, g, b = pixel[:3]
    assert r > 200 and g < 60 and b < 60


def test_transparency_goes_onto_white(tmp_path: Path, renderer: Renderer) -> None:
    img = Image.new("RGBA", (30, 30), (0, 0, 0, 0))
    img.paste((0, 0, 0, 255), (0, 0, 10, 10))
    path = tmp_path / "clear.png"
    img.save(path)
    (page,) = collect(renderer, path)
    assert isinstance(page, RenderedPage)
    assert page.image.getpixel((20, 20)) == (255, 255, 255)
    assert page.image.getpixel((5, 5)) == (0, 0, 0)


def test_large_image_is_downscaled_within_the_cap(tmp_path: Path, renderer: Renderer) -> None:
    path = tmp_path / "big.jpg"
    Image.new("RGB", (3000, 2000), (10, 120, 200)).save(path, quality=80)
    (page,) = collect(renderer, path)
    assert isinstance(page, RenderedPage)
    assert page.image.width * page.image.height <= MAX_PIXELS
    assert page.image.width * page.image.height > 0.95 * MAX_PIXELS
    assert page.image.width / page.image.height == pytest.approx(1.5, rel=0.01)


def test_image_too_large_to_decode_is_refused_before_decoding(tmp_path: Path, renderer: Renderer) -> None:
    # A PNG whose header claims 30000 x 30000 pixels (2.7 GB decoded): refused before decoding, by
    # Pillow's own guard as it opens (past 179 Mpx), in the worker as in the embedder.
    path = png_header_only(tmp_path / "bomb.png", 30_000, 30_000)
    with pytest.raises(RenderError, match=r"image is too large to decode \(Image size \(900000000 pixels\)"):
        renderer.open(path)
    # a TIFF's later frames are not checked by Pillow: docvec's limit holds there
    frames = [Image.new("RGB", (20, 20)), Image.new("RGB", (20, 20))]
    tiff = tmp_path / "scan.tiff"
    frames[0].save(tiff, save_all=True, append_images=frames[1:])
    with Renderer(target_pixels=TARGET_PIXELS, memory_limit=1000) as tight:
        pages = collect(tight, tiff)
        assert all(isinstance(p, PageFailure) and "decoding it takes about" in p.reason for p in pages)


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_one_decoding_limit_for_the_workers_and_the_embedder(tmp_path: Path, documents: Path) -> None:
    from docvec._model._images import load_image

    # 8192 x 8192 RGBA: 256 MB decoded, 1 GB with its RGB and compositing copies (a 16384 x 16384 RGBA PNG
    # took 6.3 GB in a worker before; now Pillow's guard refuses it while opening, as above)
    bomb = png_header_only(tmp_path / "bomb.png", 8192, 8192, rgba=True)
    with Renderer(target_pixels=TARGET_PIXELS, memory_limit=256 << 20) as r:
        (page,) = collect(r, bomb)
        assert isinstance(page, PageFailure)
        assert page.reason.startswith(
            "image is 8192x8192 RGBA: decoding it takes about 960 MB, over the 256 MB"
        )
        with pytest.raises(InputError) as info:
            load_image(bomb, budget=256 << 20)
        assert info.value.reason == page.reason  # the same rule, the same words
        # a 4000 x 3000 RGB image takes 72 MB: within the limit, decoded (and found to hold no pixels)
        fine = png_header_only(tmp_path / "fine.png", 4000, 3000)
        (page,) = collect(r, fine)
        assert isinstance(page, PageFailure) and "limit" not in page.reason
        # the worker holds itself to the limit (its own ~256 MB besides), and documents render within it
        (pid,) = r.worker_pids
        limits = Path(f"/proc/{pid}/limits").read_text()
        assert re.search(rf"Max data size\s+{(256 << 20) + (256 << 20)}\s", limits), limits
        assert len(rendered(collect(r, documents / "pysamples__pdflatex-4-pages.pdf"))) == 4


def test_unreadable_image_fails_the_document(tmp_path: Path, renderer: Renderer) -> None:
    path = tmp_path / "broken.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    with pytest.raises(RenderError, match="image"):
        collect(renderer, path)


# -- streaming, workers, time limit, crashes ------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_book_streams_with_bounded_memory(book: Path, renderer: Renderer) -> None:
    before = rss_bytes()
    peak = before
    numbers = []
    for page in renderer.pages(book):
        assert isinstance(page, RenderedPage)
        numbers.append(page.number)
        peak = max(peak, rss_bytes())
        del page
    assert numbers == list(range(1, BOOK_PAGES + 1))
    assert peak - before < 150 * 2**20, f"parent RSS grew by {(peak - before) / 2**20:.0f} MB"


def test_early_close_leaves_the_worker_usable(documents: Path, renderer: Renderer, book: Path) -> None:
    it = renderer.pages(book)
    assert [next(it).number for _ in range(3)] == [1, 2, 3]
    pids = renderer.worker_pids
    it.close()
    assert renderer.worker_pids == pids  # cancelled, not killed
    assert [p.number for p in renderer.pages(documents / "pysamples__multicolumn.pdf")] == [1, 2, 3]


def test_one_document_at_a_time(documents: Path, renderer: Renderer, book: Path) -> None:
    it = renderer.pages(book)
    next(it)
    with pytest.raises(RendererStateError, match="already rendering"):
        renderer.open(documents / "pysamples__minimal-document.pdf")
    it.close()
    assert renderer.open(documents / "pysamples__minimal-document.pdf").page_count == 1


def test_two_workers_keep_page_order_and_pixels(documents: Path, renderer: Renderer, book: Path) -> None:
    path = book
    with Renderer(target_pixels=TARGET_PIXELS, workers=2) as two:
        pages = rendered(collect(two, path))
        assert len(two.worker_pids) == 2
        assert [p.number for p in pages] == list(range(1, BOOK_PAGES + 1))
        # A page count that does not divide evenly, and a start past the middle.
        assert [p.number for p in two.pages(documents / "pysamples__multicolumn.pdf", first=2)] == [2, 3]
    one = rendered(collect(renderer, path, first=40))
    for a, b in zip(pages[39:45], one[:6], strict=True):
        assert a.number == b.number
        assert a.image.tobytes() == b.image.tobytes()


def test_time_limit_replaces_the_worker(documents: Path, book: Path) -> None:
    with Renderer(target_pixels=TARGET_PIXELS, timeout_s=0.001) as r:
        with pytest.raises(RenderError, match=r"timed out after 0\.001 s") as info:
            collect(r, book)
        assert str(book) in str(info.value)
        (first_pid,) = r.worker_pids  # the successor, started at once
        with pytest.raises(RenderError, match="timed out"):
            next(r.pages(book, first=50))
        (second_pid,) = r.worker_pids
        assert second_pid != first_pid
        r.timeout_s = 60.0  # a plain attribute: the next documents get a usable limit
        assert len(rendered(collect(r, documents / "pysamples__pdflatex-4-pages.pdf"))) == 4
        assert r.worker_pids == [second_pid]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_killed_worker_fails_the_document_only(documents: Path, sig: signal.Signals, book: Path) -> None:
    with Renderer(target_pixels=TARGET_PIXELS) as r:
        it = r.pages(book)
        assert next(it).number == 1
        (pid,) = r.worker_pids
        os.kill(pid, sig)
        with pytest.raises(RenderError, match=f"crashed .*{sig.name}"):
            for _ in it:
                pass
        pages = collect(r, documents / "pysamples__pdflatex-4-pages.pdf")
        assert len(rendered(pages)) == 4
        assert r.worker_pids != [pid]


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError):
        Renderer(target_pixels=TARGET_PIXELS, workers=0)
    with pytest.raises(ConfigError):
        Renderer(target_pixels=1000, max_pixels=999)
    with pytest.raises(ConfigError):
        Renderer(target_pixels=TARGET_PIXELS, timeout_s=0)


def test_closed_renderer_refuses_work(documents: Path) -> None:
    r = Renderer(target_pixels=TARGET_PIXELS)
    r.close()
    r.close()
    with pytest.raises(RendererStateError, match="closed"):
        r.open(documents / "pysamples__minimal-document.pdf")


def test_rendering_overlaps_with_the_consumer(tmp_path: Path, renderer: Renderer) -> None:
    # While the consumer is busy with a page (embedding it, say), the worker renders the next ones.
    path = slow_pdf(tmp_path / "slow.pdf", pages=8, fills=150)
    it = renderer.pages(path)
    next(it)
    time.sleep(1.5)  # the consumer is busy; the worker fills its prefetch
    start = time.monotonic()
    for _ in range(3):
        next(it)
    ready = time.monotonic() - start
    next(it)
    start = time.monotonic()
    for _ in range(3):
        next(it)
    busy = time.monotonic() - start  # pages 6-8 are rendered while the consumer waits
    assert list(it) == []
    assert ready < 0.5 * busy, (ready, busy)


def test_the_consumers_time_is_not_charged(tmp_path: Path) -> None:
    # The time limit is for rendering: a consumer slower than the renderer never runs out of it, even
    # when the document takes longer than the limit from first page to last.
    path = slow_pdf(tmp_path / "slow.pdf", pages=5)
    with Renderer(target_pixels=TARGET_PIXELS, timeout_s=2.0) as r:
        for page in r.pages(path):
            assert isinstance(page, RenderedPage)
            time.sleep(0.5)


def test_workers_that_cannot_start_stop_the_run_not_one_document(
    documents: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_dir: Path
) -> None:
    from docvec import Index, Settings
    from docvec._errors import RendererStartError
    from docvec._render import _renderer

    # a worker that exits before it says it is ready (as one whose environment is broken does)
    monkeypatch.setattr(_renderer, "_ENTRY", "import sys; sys.exit(3)")
    with Renderer(target_pixels=TARGET_PIXELS) as r, pytest.raises(RendererStartError) as e:
        r.open(documents / "pysamples__minimal-document.pdf")
    assert "the render worker could not start (exit code 3)" in str(e.value)
    with (
        Index.open(Settings(data_dir=tmp_path / "data", model=str(tiny_dir))) as index,
        pytest.raises(RendererStartError),
    ):
        index.add([documents / "pysamples__minimal-document.pdf", documents / "pysamples__smile.png"])


# -- page text ------------------------------------------------------------------------------------------

#: the CJK font the embedded-font test uses, and the Debian package that ships it
CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")
CJK_PACKAGE = "fonts-wqy-zenhei"


def words(text: str | None) -> set[str]:
    return set(re.findall(r"\w+", (text or "").casefold()))


def one(items: list[RenderedPage | PageFailure]) -> RenderedPage:
    (page,) = items
    assert isinstance(page, RenderedPage), page
    return page


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
    assert worker.clean_text(raw, 100) == "a\nbc\n\nd\né\n\tf\ng"


def test_long_text_is_cut_at_a_whitespace(tmp_path: Path) -> None:
    path = make_text_pdf(tmp_path / "long.pdf", 1, lines=40)
    with Renderer(target_pixels=TARGET_PIXELS, text=True, text_limit=1000) as short:
        cut = one(list(short.pages(path))).text
    with Renderer(target_pixels=TARGET_PIXELS, text=True) as full_renderer:
        full = one(list(full_renderer.pages(path))).text
    assert cut is not None and full is not None
    assert 900 <= len(cut) <= 1000 and full.startswith(cut) and full[len(cut)].isspace()
    assert worker.cut_text("x" * 50, 20) == "x" * 20  # one long run: cut at the limit


def test_without_text_nothing_is_extracted(tmp_path: Path) -> None:
    path = make_text_pdf(tmp_path / "plain.pdf", 1, lines=3)
    with Renderer(target_pixels=TARGET_PIXELS, ocr="on") as plain:  # OCR means nothing without text
        page = one(list(plain.pages(path)))
    assert page.text is None and page.text_from is None


def test_text_settings_are_checked() -> None:
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
    assert worker.layer_problem(contents, 0, 40) is None  # dot leaders count once
    assert worker.layer_problem("habibi حبيبي ϲΒϴΒ", 5, 24) is None  # a few unmapped glyphs: the layer stays
    assert "unicode mapping" in (worker.layer_problem("abcdefgh", 3, 8) or "")
    assert "private-use" in (worker.layer_problem("\ue001\ue002\ue003 ab", 0, 5) or "")
    assert "U+FFFD" in (worker.layer_problem("\ufffd\ufffd ok", 0, 4) or "")
    assert "letters or digits" in (worker.layer_problem("∑∫≈≠±§¶†‡•√∞∂∆∏ ab", 0, 17) or "")
    assert (
        worker.layer_problem("— 3 —", 0, 3) is None
        and worker.layer_problem("• ·", 0, 2) == "no letter or digit"
    )


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
            # the page OCR would read is marked unread, for a run that can read it
            page = one(list(renderer.pages(scan)))
            assert (page.text, page.text_from) == (None, "unread")
            assert list(renderer.texts(scan)) == [ExtractedText(1, None, "unread")]
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


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xff\xff\xff\xff" + b"\x7f" * 8,  # a length past any size: what a read cut by Ctrl-C leaves behind
        b"\x00\x00\x00\x05" + b"junk!",  # a message that does not unpickle
    ],
)
def test_a_result_pipe_read_out_of_step_is_a_worker_gone(garbage: bytes) -> None:
    from multiprocessing.connection import Connection

    from docvec._render._renderer import _Worker, _WorkerGone

    read_end, write_end = os.pipe()
    handle = object.__new__(_Worker)  # the pipe alone, without a process
    handle.results = Connection(read_end, writable=False)
    try:
        os.write(write_end, garbage)
        with pytest.raises(_WorkerGone):
            handle.receive(5)
    finally:
        handle.results.close()
        os.close(write_end)
