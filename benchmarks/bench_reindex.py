"""Reindexing against a fresh ingest of the same pages, measured side by side in one run.

    python benchmarks/bench_reindex.py [--pages 1000] [--max-pixels N] [--model DIR]

For the shipped samples and for a synthetic collection of ``--pages`` pages (ten PDFs of text), prints
pages/s of: a fresh ingest, at the page budget and at twice it; a reindex to another model (the tiny
checkpoint converted to BF16: every page embedded again from its stored image), against the first; a
reindex to twice the budget (every page rendered again from its file), against the second; and the
searches answered, from another thread, while each reindex ran (count, failures).
Default: the tiny test model at 64 image tokens a page.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=1000, help="pages of the synthetic collection")
    ap.add_argument("--max-pixels", type=int, default=28 * 28 * 64, help="page budget of the first ingest")
    ap.add_argument("--model", help="model folder with an hf/ checkpoint (default: the tiny test model)")
    args = ap.parse_args()

    from tests.documents import make_text_pdf

    from docvec import EmbedSettings, Index, ReindexSpec, Settings
    from docvec._tools._convert import convert_checkpoint
    from docvec._tools._tiny import build_tiny_model
    from docvec._tools._toolchain import LlamaCppSource

    base = Settings()
    folder = (
        Path(args.model)
        if args.model
        else build_tiny_model(base.cache_dir / "models" / "tiny", cache_dir=base.cache_dir).mmproj.parent
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        other = convert_checkpoint(
            folder / "hf",
            work / "bf16",
            source=LlamaCppSource.in_cache(base.cache_dir),
            name="bench",
            outtype="bf16",
        ).main
        other_model = f"{other.language_model},{other.mmproj}"
        synthetic = work / "synthetic"
        synthetic.mkdir()
        per_file = max(args.pages // 10, 1)
        for i in range(10):  # each file its own content (the same bytes would be one document)
            make_text_pdf(synthetic / f"doc-{i:02d}.pdf", per_file, lines=30 + i)
        corpora = {
            "samples": ROOT / "src" / "docvec" / "samples",
            f"synthetic {10 * per_file} pages": synthetic,
        }
        print(
            f"model {folder.name}; first ingest at {args.max_pixels} pixels a page; "
            f"other model {other.language_model.name}; other budget {2 * args.max_pixels}"
        )
        for name, corpus in corpora.items():
            rates = {}
            for budget in (2 * args.max_pixels, args.max_pixels):  # the budget reindexed to, then the first
                folder_name = f"{name.replace(' ', '-')}-{budget}"
                settings = base.model_copy(
                    update={
                        "data_dir": work / folder_name,
                        "model": str(folder),
                        "embed": EmbedSettings(max_pixels=budget),
                    }
                )
                index = Index.open(settings)
                t = time.perf_counter()
                report = index.add([corpus])
                rates[budget] = report.pages_indexed / (time.perf_counter() - t)
                if budget != args.max_pixels:
                    index.close()
            pages = report.pages_indexed
            print(f"\n{name}: {pages} pages")
            print(f"  fresh ingest              {rates[args.max_pixels]:8.2f} pages/s")
            print(f"  fresh ingest, 2x budget   {rates[2 * args.max_pixels]:8.2f} pages/s")
            with index:
                for label, change, against in (
                    ("reindex, another model", {"model": other_model}, args.max_pixels),
                    ("reindex, 2x budget", {"max_pixels": 2 * args.max_pixels}, 2 * args.max_pixels),
                ):
                    searches = _Searcher(index)
                    t = time.perf_counter()
                    done = index.reindex(ReindexSpec(**change))  # type: ignore[arg-type]
                    seconds = time.perf_counter() - t
                    n, bad = searches.stop()
                    rate = done.pages_embedded / seconds
                    print(
                        f"  {label:<25} {rate:8.2f} pages/s  ({rate / rates[against]:.2f} of a fresh "
                        f"ingest at its budget; {done.pages_rendered} rendered; {n} searches answered "
                        f"meanwhile, {bad} failed)"
                    )


class _Searcher:
    """Searches the index from a thread, ten times a second (a steady load, not one that takes a core of
    the two the reindex runs on), until stopped; counts answers and failures (errors, no hits)."""

    def __init__(self, index: object) -> None:
        self.index = index
        self.answered = self.failed = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                hits = self.index.search("the quick brown fox", 5)  # type: ignore[attr-defined]
                if hits:
                    self.answered += 1
                else:
                    self.failed += 1
            except Exception:
                self.failed += 1

    def stop(self) -> tuple[int, int]:
        self._stop.set()
        self._t.join()
        return self.answered, self.failed


if __name__ == "__main__":
    main()
