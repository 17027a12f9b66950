"""Ingestion throughput and memory, measured side by side in one run.

    python benchmarks/bench_ingest.py [--model DIR] [--pdf FILE] [--pages N] [--scans N] [--groups 1,4]

Prints pages/s for rendering alone, embedding alone and the whole ingest (render + embed + page store +
Qdrant), the ratio of the whole to the slower stage (target >= 0.9: rendering overlaps embedding), and the
peak RSS of the ingest above the embedder's own (target: within 300 MB for the 117-page book).
Then the text layer's cost per page beside rendering's and embedding's: reading the PDF's text layer along
with rendering (the ingest's way), the text alone (reindex --text's way), OCR of the same pages (tesseract,
when installed), and the terms (docvec._text._terms) of the text found.
Then a folder of one-page documents (the book's first ``--scans`` pages, each saved as a PDF of its own), the
way scans arrive: ingested at each ``--groups`` value of ``embed.vision_batch``, pages grouped across
documents and rendered ahead while the model embeds, pages/s side by side, with the ratio to the slower
stage (the model's, one page at a time, or rendering's); and the same folder with a model that answers at
once (a constant unit vector a page): the ceiling the rest of the pipeline (rendering, the page store,
Qdrant, the ingest's own work) puts on a fast device.
Default: the tiny test model and ../shared/corpus's 117-page LaTeX book.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT.parent / "shared" / "corpus" / "pysamples__GeoTopo-komprimiert.pdf"


class PeakRSS:
    """Samples this process's RSS every 20 ms; ``peak`` is the highest seen."""

    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRSS:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.proc.memory_info().rss)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model folder (default: the tiny test model, built once)")
    ap.add_argument("--pdf", type=Path, default=BOOK)
    ap.add_argument("--pages", type=int, default=30, help="pages for the render-alone and embed-alone runs")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--ocr-pages", type=int, default=5, help="pages read by OCR for its cost (0: none)")
    ap.add_argument("--scans", type=int, default=24, help="one-page documents for the grouping run (0: none)")
    ap.add_argument("--groups", default="1,4", help="embed.vision_batch values for the grouping run")
    args = ap.parse_args()

    from docvec import Embedder, Index, RenderSettings, Settings
    from docvec._render._renderer import PageFailure, Renderer
    from docvec._tools._tiny import build_tiny_model

    base = Settings()
    model = args.model or str(
        build_tiny_model(base.cache_dir / "models" / "tiny", cache_dir=base.cache_dir).mmproj.parent
    )
    mb = 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        settings = base.model_copy(
            update={"data_dir": Path(tmp), "model": model, "render": RenderSettings(workers=args.workers)}
        )
        with Embedder.open(model, settings.embed) as emb:
            emb.embed_images([ROOT / "src" / "docvec" / "samples" / "revenue-chart.png"])  # warm up
            own = psutil.Process().memory_info().rss

            target_pixels = emb.bounds.max_pixels
            with Renderer(workers=args.workers, target_pixels=target_pixels) as r:
                n_total = r.open(args.pdf).page_count
                t = time.perf_counter()
                pages = []
                for item in r.pages(args.pdf):
                    if not isinstance(item, PageFailure):
                        pages.append(item.image)
                    if len(pages) == args.pages:
                        break
                render_rate = len(pages) / (time.perf_counter() - t)

            t = time.perf_counter()
            for img in pages:
                emb.embed_images([img])
            embed_rate = len(pages) / (time.perf_counter() - t)
            del pages

            with PeakRSS() as rss, Index.open(settings, embedder=emb) as index:
                t = time.perf_counter()
                report = index.add([args.pdf])
                ingest_rate = report.pages_indexed / (time.perf_counter() - t)

    slower = min(render_rate, embed_rate)
    print(f"{args.pdf.name}: {n_total} pages; model {Path(model).name}; {args.workers} render worker(s)")
    print(f"render alone   {render_rate:8.2f} pages/s  ({args.pages} pages)")
    print(f"embed alone    {embed_rate:8.2f} pages/s  ({args.pages} pages)")
    done = f"{report.pages_indexed} pages, {report.pages_failed} failed"
    print(f"whole ingest   {ingest_rate:8.2f} pages/s  ({done})")
    print(f"ingest / slower stage = {ingest_rate / slower:.2f}  (target >= 0.90)")
    print(
        f"RSS: embedder alone {own / mb:.0f} MB, peak while ingesting {rss.peak / mb:.0f} MB, "
        f"above the embedder {(rss.peak - own) / mb:.0f} MB  (target <= 300 MB)"
    )
    bench_text(args, target_pixels, 1 / render_rate, 1 / embed_rate)
    if args.scans:
        bench_scans(args, settings, render_rate, embed_rate)


def _seconds_per_page(renderer: Any, path: Path, pages: int, *, texts: bool) -> tuple[float, list[str]]:
    """Seconds per page of ``renderer`` over the first ``pages`` pages of ``path`` (rendered, or their text
    only), and the texts it found."""
    from docvec._render._renderer import PageFailure

    info = renderer.open(path)
    found: list[str] = []
    done = 0
    t = time.perf_counter()
    for item in renderer.texts(info) if texts else renderer.pages(info):
        if not isinstance(item, PageFailure):
            found.append(item.text or "")
        done += 1
        if done == pages:
            break
    return (time.perf_counter() - t) / max(done, 1), found


def bench_text(args: argparse.Namespace, target_pixels: int, render_s: float, embed_s: float) -> None:
    from docvec._render import _ocr
    from docvec._render._renderer import Renderer
    from docvec._text._terms import Analyzer, TermWeights, document_vector

    common = {"workers": args.workers, "target_pixels": target_pixels}
    with Renderer(**common) as r:  # type: ignore[arg-type]
        plain, _ = _seconds_per_page(r, args.pdf, args.pages, texts=False)
    with Renderer(**common, text=True, ocr="off") as r:  # type: ignore[arg-type]
        with_text, found = _seconds_per_page(r, args.pdf, args.pages, texts=False)
        text_only, _ = _seconds_per_page(r, args.pdf, args.pages, texts=True)
    analyzer, weights = Analyzer(), TermWeights()
    t = time.perf_counter()
    for text in found:
        document_vector(text, analyzer, weights)
    terms_s = (time.perf_counter() - t) / max(len(found), 1)
    chars = sum(len(x) for x in found) / max(len(found), 1)
    print(f"\ntext layer, per page ({len(found)} pages, {chars:.0f} characters a page on average)")
    print(f"{'step':<44} {'ms/page':>9} {'x render':>9} {'x embed':>9}")

    def row(what: str, seconds: float) -> None:
        print(f"{what:<44} {seconds * 1e3:>9.2f} {seconds / render_s:>9.3f} {seconds / embed_s:>9.4f}")

    row("render alone (this run)", plain)
    row("render + text layer", with_text)
    row("  of which the text layer", max(with_text - plain, 0.0))
    row("text layer alone (reindex --text)", text_only)
    row("terms of the text (analysis + weights)", terms_s)
    row("embed (from above)", embed_s)
    missing = _ocr.available()
    if args.ocr_pages and missing is None:
        with Renderer(**common, text=True, ocr="on") as r:  # type: ignore[arg-type]
            ocr_s, _ = _seconds_per_page(r, args.pdf, args.ocr_pages, texts=True)
        row(f"OCR ({_ocr.ENGINE}, {_ocr.DPI} dpi; {args.ocr_pages} pages)", ocr_s)
    elif args.ocr_pages:
        print(f"OCR: not measured ({missing})")


def bench_scans(args: argparse.Namespace, settings: Any, render_rate: float, embed_rate: float) -> None:
    """A folder of one-page PDFs ingested at each ``--groups`` vision_batch, in one run."""
    import pypdfium2 as pdfium

    from docvec import Embedder, Index

    slower = min(render_rate, embed_rate)
    print(f"\n{args.scans} one-page documents (the book's first pages), {args.workers} render worker(s)")
    print(f"{'vision_batch':>12} {'pages/s':>9} {'x slower stage':>15} {'x batch 1':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "scans"
        folder.mkdir()
        book = pdfium.PdfDocument(args.pdf)
        for i in range(min(args.scans, len(book))):
            one = pdfium.PdfDocument.new()
            one.import_pages(book, [i])
            one.save(folder / f"scan-{i:04d}.pdf")
            one.close()
        book.close()
        first = None
        sample = ROOT / "src" / "docvec" / "samples" / "revenue-chart.png"
        groups = [int(g) for g in args.groups.split(",")]
        for group in [*groups, 0]:
            embed = settings.embed.model_copy(update={"vision_batch": max(group, 1)})
            data = Path(tmp) / f"data-{group}"
            with Embedder.open(settings.model, embed) as emb:
                emb.embed_images([sample])  # warm up
                if not group:  # the instant model: this instance's answer replaced, its vectors' kind kept
                    unit = np.zeros(emb.dim, np.float32)
                    unit[0] = 1.0
                    emb.embed_images = lambda images, u=unit, **kw: np.tile(u, (len(images), 1))
                run = settings.model_copy(update={"data_dir": data, "embed": embed})
                with Index.open(run, embedder=emb) as index:
                    index.add([sample])  # the render workers started and the collection made beforehand
                    t = time.perf_counter()
                    report = index.add([folder])
                    rate = report.pages_indexed / (time.perf_counter() - t)
            if not group:
                print(f"{'instant':>12} {rate:>9.2f}  (the pipeline's ceiling: model time left out)")
                continue
            first = first or rate
            print(f"{group:>12} {rate:>9.2f} {rate / slower:>15.2f} {rate / first:>10.2f}")


if __name__ == "__main__":
    main()
