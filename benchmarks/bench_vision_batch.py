"""Pages per second with several pages through the vision encoder in one pass and the language model in one
batch (``embed.vision_batch``).

    python benchmarks/bench_vision_batch.py                       # the tiny models of the three families
    python benchmarks/bench_vision_batch.py --full --family qwen3-vl --pages 4 --size 448x448
                                                                  # Qwen3-VL-2B's geometry (built once)

For each family, one embedder embeds the same pages (a mix of the three sizes of ``bench_embed.py``, or
``--size``) in groups of each ``vision_batch`` (1, 2, 4 unless ``--batches`` says otherwise), as the setting
groups them (each group's prompts decoded as sequences of one batch), in rounds that alternate the batch
sizes so that the shared machine's noise falls on all of them alike. It prints the vision encoder's and the
language model's seconds a page (each stage's time over the pages) and the whole embedding's pages per
second, the median over the rounds (the first, which allocates the buffers, left out when there are more),
and checks that the vectors equal those of batch 1 (least cosine). Needs the llama.cpp build with patch 0008
(without it every group runs one pass per page: the passes column says so).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_embed import FAMILIES, GEOMETRIES, IMAGES, _models, _page


def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def _sizes(args: argparse.Namespace) -> list[tuple[int, int]]:
    if args.size:
        w, h = (int(v) for v in args.size.lower().split("x"))
        return [(w, h)] * args.pages
    return [(IMAGES[i % len(IMAGES)][1], IMAGES[i % len(IMAGES)][2]) for i in range(args.pages)]


def _family(family: str, args: argparse.Namespace, cache: Path) -> None:
    import numpy as np

    from docvec import Embedder, EmbedSettings, ModelFiles
    from docvec._model._embedder import normalize
    from docvec._tools._convert import default_outtype

    outtype = default_outtype()  # the GGUF type docvec converts to on this CPU
    _, ggufs = _models(family, args.full, cache, [outtype])
    lm, mm = ggufs[f"docvec {outtype.upper()}"]
    head = lm.parent / "multivector-head.gguf"
    files = ModelFiles(lm, mm, head if head.is_file() else None)
    pages = [_page(w, h) for w, h in _sizes(args)]
    vision: dict[int, list[float]] = {b: [] for b in args.batches}
    lm: dict[int, list[float]] = {b: [] for b in args.batches}
    total: dict[int, list[float]] = {b: [] for b in args.batches}
    passes: dict[int, int] = {}
    vectors: dict[int, Any] = {}
    # one embedder: its pages go through the encoder and the language model in groups of b, as with
    # vision_batch=b (its pages context holds the largest group)
    settings = EmbedSettings(
        threads=args.threads, vision_batch=max(args.batches), decode_batch=args.decode_batch
    )
    with Embedder(files, settings) as emb:
        session = emb._session
        for _ in range(args.rounds):
            for b in args.batches:
                before = session.vision.passes
                t0 = time.perf_counter()
                states = [
                    s
                    for i in range(0, len(pages), b)
                    for s in emb._images_states([emb._prepare(p) for p in pages[i : i + b]])
                ]
                total[b].append(time.perf_counter() - t0)
                vision[b].append(sum(s.vision_seconds for s in states))
                lm[b].append(sum(s.lm_seconds for s in states))
                passes[b] = session.vision.passes - before
                vectors[b] = normalize(np.stack([emb._vectors(s.states, s.span, None, []) for s in states]))
    geometry = GEOMETRIES[family] if args.full else "tiny"
    print(
        f"\n{family} ({geometry}), {len(pages)} pages, {args.threads} threads, {args.rounds} rounds, "
        f"{outtype.upper()}, decode_batch {args.decode_batch}, {_cpu()}"
    )
    print(
        "| vision_batch | encoder passes | vision s/page | language model s/page | pages/s (whole embedding) "
        "| least cosine vs batch 1 |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    base = vectors[args.batches[0]]
    skip = 1 if args.rounds > 1 else 0  # the first round allocates the encoder's buffers: left out
    for b in args.batches:
        v = statistics.median(vision[b][skip:]) / len(pages)
        t = statistics.median(lm[b][skip:]) / len(pages)
        pps = len(pages) / statistics.median(total[b][skip:])
        cos = float(np.min(np.sum(base * vectors[b], axis=1)))
        print(f"| {b} | {passes[b]} | {v:.4f} | {t:.4f} | {pps:.2f} | {cos:.7f} |")


def main() -> None:
    from docvec._config import Settings

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", choices=sorted(FAMILIES), action="append")
    ap.add_argument("--full", action="store_true", help="the real geometry (random weights, built once)")
    ap.add_argument("--pages", type=int, default=12)
    ap.add_argument("--size", help="WxH for every page instead of the three sizes' mix")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--decode-batch", type=int, default=1024, help="tokens per llama.cpp call (decode_batch)")
    args = ap.parse_args()
    cache = Settings().cache_dir
    for family in args.family or list(FAMILIES):
        _family(family, args, cache)


if __name__ == "__main__":
    main()
