"""Ingestion throughput and memory, measured side by side in one run.

    python benchmarks/bench_ingest.py [--model DIR] [--pdf FILE] [--pages N]

Prints pages/s for rendering alone, embedding alone and the whole ingest (render + embed + page store +
Qdrant), the ratio of the whole to the slower stage (target >= 0.9: rendering overlaps embedding), and the
peak RSS of the ingest above the embedder's own (target: within 300 MB for the 117-page book).
Default: the tiny test model and ../shared/corpus's 117-page LaTeX book.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

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

            with Renderer(workers=args.workers, target_pixels=emb.bounds.max_pixels) as r:
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


if __name__ == "__main__":
    main()
