"""Embed one A4 page (and one query) with the bench models, for a profiler to watch.

    make bench-full                    # builds the real geometries' GGUFs once
    perf record -k CLOCK_MONOTONIC -F 250 -o /tmp/page.perf -- python benchmarks/profile_page.py --full
    perf report -i /tmp/page.perf --no-children --sort dso,symbol --time START,VISION_END | head -40
    python benchmarks/profile_page.py --full --family qwen3-vl   # Qwen3-VL-Embedding-2B's geometry

Loading and a warm-up page come first; the page's start, the end of its vision encoder and its end are
printed in CLOCK_MONOTONIC seconds, the clock ``perf record -k CLOCK_MONOTONIC`` stamps samples with, so
``perf report --time`` can cut the profile to the vision encoder or the language model.
"""

from __future__ import annotations

import argparse
import os
import time

from bench_embed import FAMILIES, IMAGES, _page


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="the real geometries (default: the tiny ones)")
    ap.add_argument("--family", default="jina-v4", choices=list(FAMILIES))
    ap.add_argument("--type", default="BF16", choices=["F16", "BF16", "Q8_0"])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--decode-batch", type=int, default=1024, help="tokens per llama.cpp decode call")
    args = ap.parse_args()

    from docvec import Embedder, EmbedSettings, ModelFiles, Settings

    base = Settings().cache_dir / "models" / FAMILIES[args.family][int(args.full)]
    if args.type == "Q8_0":
        files = ModelFiles(base / "f16" / "Q8_0" / "m-Q8_0.gguf", base / "f16" / "mmproj-m-F16.gguf")
    else:
        d = base / args.type.lower()
        files = ModelFiles(d / f"m-{args.type}.gguf", d / f"mmproj-m-{args.type}.gguf")
    if not files.language_model.is_file():
        make = "make bench-full" if args.full else "make bench"
        raise SystemExit(f"{files.language_model}: not built yet; run {make} first")
    name, w, h = IMAGES[-1]
    with Embedder(files, EmbedSettings(threads=args.threads, decode_batch=args.decode_batch)) as emb:
        emb.embed_images([_page(224, 224)])
        t = time.perf_counter()
        start = time.monotonic()
        st = emb.image_states(_page(w, h))
        end = time.monotonic()
        # image_states runs the vision encoder, then the language model
        print(f"START={start:.6f} VISION_END={start + st.vision_seconds:.6f} END={end:.6f}")
        print(
            f"{name}: {st.states.shape[0]} tokens, vision {st.vision_seconds:.2f} s + language model "
            f"{st.lm_seconds:.2f} s (wall {time.perf_counter() - t:.2f} s)"
        )
        t = time.perf_counter()
        emb.embed_queries(["total amount due on the invoice"])
        print(f"query: {time.perf_counter() - t:.3f} s")


if __name__ == "__main__":
    main()
