"""The render stage on real-world documents and on generated edge cases (sizes, frames, crashes, time)."""

from __future__ import annotations

import math
import os
import random
import re
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from docvec import ConfigError, DocvecError, InputError, RenderError
from docvec._errors import RendererStateError
from docvec._model._profiles import JINA_V4
from docvec._render._renderer import (
    DocumentInfo,
    PageFailure,
    RenderedPage,
    Renderer,
    detect_kind,
)

from .documents import CORPUS_ENV, DOCUMENTS, extended_corpus, manifest_rows, png_header_only, write_pdf
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


def slow_pdf(path: Path, pages: int, fills: int = 100) -> Path:
    """A PDF whose pages are slow to render (~0.1 s a page per 100 fills): translucent full-page fills."""
    rng = random.Random(0)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for _ in range(pages):
        ops = b"/GS0 gs\n" + b"".join(
            b"%.2f %.2f %.2f rg 0 0 595 842 re f\n" % (rng.random(), rng.random(), rng.random())
            for _ in range(fills)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(ops), ops))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents %d 0 R"
            b" /Resources << /ExtGState << /GS0 << /ca 0.02 >> >> >> >>" % len(objects)
        )
        kids.append(len(objects))
    return write_pdf(path, objects, kids)


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
