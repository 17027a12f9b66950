"""Late-interaction parity at a real geometry: every token's vector through docvec against colpali-engine's.

    python benchmarks/parity_colqwen.py [--family colqwen3.5|colqwen3] [--threads 2] [--outtype f16]

``colqwen3.5``: the VultronRetriever Flash geometry that ``bench_embed.py --full --family colqwen3.5`` builds
and caches (``<cache>/models/bench-colqwen35-flash``; run that first). ``colqwen3``: a ColQwen3 of
Qwen3-VL-4B's geometry (tomoro-colqwen3-embed-4b's backbone), built and converted here once into
``<cache>/models/parity-colqwen3-4b`` (9 GB of bfloat16 weights, 9 GB of F16 GGUFs; the fp32 reference takes
about 18 GB of memory). Random weights. The reference (colpali-engine's class in fp32) runs in a child process
of its own and hands its vectors over in a file, so that the two models are never in memory together.
Prints, for queries and three page sizes at docvec's page budget:
the token counts, the per-token cosine (median and least) and MaxSim's difference (whole, and per query token)
with the profile's default attention settings.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_embed import IMAGES, QUERIES, _page  # noqa: E402


def _colqwen3_4b(cache: Path, outtype: str) -> Path:
    """The ColQwen3 of Qwen3-VL-4B's geometry, built (bfloat16 weights) and converted once; its folder."""
    from docvec._tools._tiny_checkpoint import build_checkpoint
    from docvec._tools._tiny_qwen3vl import ColQwen3Geometry
    from docvec._tools._toolchain import LlamaCppSource

    base = cache / "models" / "parity-colqwen3-4b"
    src = LlamaCppSource.in_cache(cache)
    if not (base / "built.stamp").is_file():
        print(f"building a ColQwen3 of Qwen3-VL-4B's geometry in {base} (once) ...", flush=True)
        geometry = ColQwen3Geometry.qwen3vl_4b()  # a classmethod: the ColQwen3 of that geometry
        build_checkpoint(
            base / "hf", src.qwen2_vocab, geometry, dtype="bfloat16", cache_dir=cache / "tokenizers"
        )
        (base / "built.stamp").write_text("ok")
    for t in {"f16", outtype}:
        _convert_once(base, t, cache)
    return base


def _convert_once(base: Path, outtype: str, cache: Path) -> None:
    """``base/hf`` converted to ``outtype`` GGUFs in ``base/<outtype>``, once."""
    from docvec._tools._convert import convert_checkpoint
    from docvec._tools._toolchain import LlamaCppSource

    if not (base / outtype / "converted.stamp").is_file():
        print(f"converting to {outtype.upper()} GGUFs (once) ...", flush=True)
        src = LlamaCppSource.in_cache(cache)
        convert_checkpoint(base / "hf", base / outtype, source=src, name="m", outtype=outtype)  # type: ignore[arg-type]
        (base / outtype / "converted.stamp").write_text("ok")


def _reference(hf: Path, out: Path, threads: int) -> None:
    import torch

    from docvec._model._profiles import COLQWEN3_5
    from docvec_reference.colqwen import ColQwenReference

    # both families' page budget is 1,024 tokens
    ref = ColQwenReference(hf, dtype=torch.float32, threads=threads, max_pixels=COLQWEN3_5.page_pixels)
    arrays = {f"q{i}": ref.query(q)[0] for i, q in enumerate(QUERIES)}
    arrays |= {f"p{i}": ref.page(_page(w, h))[0] for i, (_, w, h) in enumerate(IMAGES)}
    np.savez(out, **arrays)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default="colqwen3.5", choices=("colqwen3.5", "colqwen3"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--outtype", default="f16", choices=("f16", "bf16", "f32"))
    ap.add_argument("--reference", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.reference:
        _reference(Path(args.reference[0]), Path(args.reference[1]), args.threads)
        return

    from docvec import Embedder, EmbedSettings, ModelFiles, Settings

    cache = Settings().cache_dir
    if args.family == "colqwen3":
        base = _colqwen3_4b(cache, args.outtype)
    else:
        base = cache / "models" / "bench-colqwen35-flash"
        _convert_once(base, args.outtype, cache)
    folder = base / args.outtype
    lm, mm = folder / f"m-{args.outtype.upper()}.gguf", folder / f"mmproj-m-{args.outtype.upper()}.gguf"
    head = base / "f16" / "multivector-head.gguf"
    if not (lm.is_file() and head.is_file()):
        sys.exit(f"no model in {base}: run `bench_embed.py --full --family colqwen3.5` first")
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "reference.npz"
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--threads",
                str(args.threads),
                "--reference",
                str(base / "hf"),
                str(npz),
            ],
            check=True,
            cwd=ROOT,
        )
        want = dict(np.load(npz))
    with Embedder(ModelFiles(lm, mm, head), EmbedSettings(threads=args.threads)) as emb:
        print(
            f"docvec {args.outtype.upper()} GGUFs, flash attention {emb.flash_attention}, KV {emb.kv_cache}"
        )
        queries = [emb.embed_queries_multi([q])[1][0] for q in QUERIES]
        pages = [emb.embed_images_multi([_page(w, h)])[1][0] for _, w, h in IMAGES]
    results = []
    for kind, ours, names in (("query", queries, QUERIES), ("page", pages, [n for n, _, _ in IMAGES])):
        for i, (v, name) in enumerate(zip(ours, names, strict=True)):
            w = want[f"{kind[0]}{i}"]
            if v.shape != w.shape:
                print(f"{kind} {name!r}: {v.shape[0]} tokens against {w.shape[0]}")
                continue
            cos = np.sum(v * w, axis=1) / (np.linalg.norm(v, axis=1) * np.linalg.norm(w, axis=1))
            results.append({"kind": kind, "name": name, "tokens": len(v), "median": float(np.median(cos))})
            results[-1]["min"] = float(cos.min())
            shown = f"cosine median {np.median(cos):.7f} min {cos.min():.7f}"
            print(f"{kind:5} {name[:32]:32} {len(v):>5} tokens  {shown}")

    def maxsim(q: np.ndarray, p: np.ndarray) -> float:
        return float((q.astype(np.float64) @ p.astype(np.float64).T).max(axis=1).sum())

    diff = np.array(
        [
            [abs(maxsim(q, p) - maxsim(want[f"q{i}"], want[f"p{j}"])) for j, p in enumerate(pages)]
            for i, q in enumerate(queries)
        ]
    )
    per_token = diff / np.array([[len(q)] for q in queries])
    print(f"MaxSim: largest difference {diff.max():.2e}, per query token {per_token.max():.2e}")
    print(
        json.dumps(
            {"tokens": results, "maxsim": float(diff.max()), "maxsim_per_token": float(per_token.max())}
        )
    )


if __name__ == "__main__":
    main()
