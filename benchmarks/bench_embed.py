"""Embedding speed and memory: docvec (llama.cpp) against the transformers reference, side by side.

    python benchmarks/bench_embed.py            # the tiny test models of both families
    python benchmarks/bench_embed.py --full     # random weights, real geometries: jina-embeddings-v4's
                                                # Qwen2.5-VL-3B (7.5 GB) and Qwen3-VL-Embedding-2B's
                                                # Qwen3-VL-2B (4.3 GB), built and converted once, cached
    python benchmarks/bench_embed.py --family qwen3-vl   # one family only
    python benchmarks/bench_embed.py --full --family colqwen3.5   # VultronRetriever Flash's geometry
                                                # (Qwen3.5-0.8B, 1.7 GB) against colpali-engine's ColQwen3_5
    python benchmarks/bench_embed.py --full --baseline-libs DIR   # the default GGUFs once more on the
                                                # llama.cpp libraries in DIR (another build, e.g. the wheel
                                                # before a patch: its llama_cpp/lib), in the same run
    python benchmarks/bench_embed.py --full --types bf16,f16   # the GGUF types run, the default engine
                                                # first (default: the CPU's, as `docvec models convert`)

One table per family. Every engine runs in its own process, one after the other in this run, on the same
weights and thread count: seconds per query and per page image (three sizes, split into vision encoder and
language model), peak RSS, and ratios against docvec's default. With --full, parity against torch fp32 is
checked too. This machine is shared and noisy: compare the ratios of one run, not absolute numbers across
runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUERIES = [
    "total amount due on the invoice",
    "quarterly revenue by region",
    "who signed the contract",
    "diagram of the cooling system",
    "table of contents",
]
#: (name, width, height): 256, 352 and 736 image tokens at jina-v4's bounds; 196, 432 and 1,015 at
#: Qwen3-VL-Embedding's default page budget (1,024 tokens of 32x32 pixels)
IMAGES = [("square-448", 448, 448), ("slide-896x504", 896, 504), ("a4-page-1240x1754", 1240, 1754)]
#: the families benchmarked: the tiny and the full geometry's cache folder under <cache>/models
FAMILIES = {
    "jina-v4": ("bench-tiny", "bench-3b"),
    "qwen3-vl": ("bench-qwen3vl-tiny", "bench-qwen3vl-2b"),
    "colqwen3.5": ("bench-colqwen35-tiny", "bench-colqwen35-flash"),
}
#: the geometry each family's --full run builds, by name
GEOMETRIES = {"jina-v4": "Qwen2.5-VL-3B", "qwen3-vl": "Qwen3-VL-2B", "colqwen3.5": "VultronRetriever Flash"}


def _page(w: int, h: int) -> Any:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    for i in range(0, h - 40, 24):
        d.text(
            (30, 20 + i),
            f"Line {i // 24}: lorem ipsum dolor sit amet, consectetur {i * 7919 % 997}",
            fill="black",
        )
    d.rectangle((w // 2, h // 2, w - 40, h - 40), fill=(40, 90, 200))
    return img


# -- one engine, in a child process ----------------------------------------------------------------------


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    import resource

    import numpy as np

    threads = spec["threads"]
    out: dict[str, Any] = {"queries": [], "images": {}}
    t0 = time.perf_counter()
    if spec["engine"] == "docvec":
        from docvec import Embedder, EmbedSettings, ModelFiles

        settings = EmbedSettings(
            threads=threads,
            flash_attention=spec.get("flash_attention"),
            kv_cache=spec.get("kv_cache"),
            max_pixels=spec.get("max_pixels"),
        )
        head = Path(spec["head"]) if spec.get("head") else None
        emb = Embedder(ModelFiles(Path(spec["lm"]), Path(spec["mmproj"]), head), settings)
        out["load_s"] = time.perf_counter() - t0
        _time_queries(emb, out)
        for name, w, h in IMAGES:
            st = emb.image_states(_page(w, h))
            if emb.profile.late_interaction:  # its vector: the mean of its token vectors (after the timing)
                pooled = emb.embed_images([_page(w, h)])[0]
            elif st.span is None:  # last-token pooling
                pooled = st.states[-1]
            else:
                a, b = st.span
                pooled = st.states[a : b + 1].mean(0)
            out["images"][name] = {
                "vision_s": st.vision_seconds,
                "lm_s": st.lm_seconds,
                "tokens": int(st.states.shape[0]),
                "vec": (pooled / np.linalg.norm(pooled)).tolist(),
            }
    else:
        import torch

        ref, dtype, pixels, pooled_states = _torch_reference(spec)
        out["load_s"] = time.perf_counter() - t0
        _time_queries(ref, out)
        for name, w, h in IMAGES:
            img = _page(w, h)
            pixel_values, grid = pixels(img)
            model = ref.ref._model if isinstance(ref, _ColPali) else ref._model
            with torch.inference_mode():
                t = time.perf_counter()
                model.get_image_features(pixel_values=pixel_values.to(dtype), image_grid_thw=grid)
                vision = time.perf_counter() - t
            t = time.perf_counter()
            states, pooled = pooled_states(img)
            total = time.perf_counter() - t
            out["images"][name] = {
                "vision_s": vision,
                "lm_s": max(total - vision, 0.0),
                "tokens": int(states.shape[0]),
                "vec": (pooled / np.linalg.norm(pooled)).tolist(),
            }
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _time_queries(model: Any, out: dict[str, Any]) -> None:
    """Warm ``model`` up (first-call costs, allocations and thread pools, out of the timings), then time
    each query alone into ``out``, keeping the last one's vector."""
    model.embed_queries(["warm up"])
    model.embed_images([_page(224, 224)])
    for q in QUERIES:
        t = time.perf_counter()
        v = model.embed_queries([q])
        out["queries"].append(time.perf_counter() - t)
    out["query_vec"] = v[0].tolist()


def _torch_reference(spec: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """The family's transformers reference in ``spec["dtype"]``, with its image preprocessing (pixels,
    grid) and its token states with the official pooling (states, pooled vector)."""
    import torch

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[spec["dtype"]]
    hf, threads = Path(spec["hf"]), spec["threads"]
    if spec["family"] == "colqwen3.5":
        from docvec._model._profiles import COLQWEN3_5

        return _colpali(hf, dtype, threads, COLQWEN3_5.page_pixels)
    if spec["family"] == "qwen3-vl":
        from docvec._model._profiles import QWEN3_VL_EMBEDDING
        from docvec_reference.qwen3vl import Qwen3VLReference

        # docvec's default page budget, so that both embed the same tokens
        q3 = Qwen3VLReference(hf, dtype=dtype, threads=threads, max_pixels=QWEN3_VL_EMBEDDING.page_pixels)

        def q3_pixels(img: Any) -> tuple[Any, Any]:
            pixel_values, grid, _ = q3.pixels(img)
            return pixel_values, grid

        def q3_states(img: Any) -> tuple[Any, Any]:
            states, _, _ = q3.image_states(img)
            return states, states[-1]  # last-token pooling

        return q3, dtype, q3_pixels, q3_states
    from docvec_reference.jina_v4 import ReferenceEmbedder

    ref = ReferenceEmbedder(hf, dtype=dtype, threads=threads)

    def mean_states(img: Any) -> tuple[Any, Any]:
        states, (a, b) = ref.token_states_image(img)
        return states, states[a : b + 1].mean(0)  # mean over the image span

    return ref, dtype, ref._pixels, mean_states


class _ColPali:
    """colpali-engine's model (docvec_reference.colqwen) with the embedding methods the timings call: each
    input's token vectors, and their mean as its vector (docvec's single vector of a late-interaction
    model)."""

    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def embed_queries(self, texts: list[str]) -> Any:
        import numpy as np

        return np.stack([self.ref.query(t)[0].mean(0) for t in texts])

    def embed_images(self, images: list[Any]) -> Any:
        import numpy as np

        return np.stack([self.ref.page(img)[0].mean(0) for img in images])


def _colpali(hf: Path, dtype: Any, threads: int, max_pixels: int) -> tuple[Any, Any, Any, Any]:
    """colpali-engine's ColQwen on ``hf`` at docvec's page budget, as :func:`_torch_reference` returns it."""
    import torch

    from docvec_reference.colqwen import ColQwenReference

    ref = ColQwenReference(hf, dtype=dtype, threads=threads, max_pixels=max_pixels)

    def pixels(img: Any) -> tuple[Any, Any]:
        batch = ref._processor(images=[img.convert("RGB")], return_tensors="pt")
        return batch["pixel_values"], batch["image_grid_thw"]

    def states(img: Any) -> tuple[Any, Any]:
        vectors = ref.page(img)[0]
        return vectors, vectors.mean(0)

    del torch
    return _ColPali(ref), dtype, pixels, states


def _lib_env(libs: str | None) -> dict[str, str]:
    """The environment that makes llama-cpp-python load libllama and libmtmd (and the ggml libraries beside
    them) from ``libs`` instead of its own wheel."""
    return {"LLAMA_CPP_LIB_PATH": libs, "MTMD_CPP_LIB": libs} if libs else {}


def _run_engine(spec: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": str(spec["threads"]), **_lib_env(spec.get("libs"))},
    )
    if proc.returncode != 0:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# -- the parent: build, run every engine, print the table --------------------------------------------------


def _models(
    family: str, full: bool, cache: Path, types: list[str]
) -> tuple[Path, dict[str, tuple[Path, Path]]]:
    from docvec._tools._convert import (
        _converter_view,
        _quantize,
        _run_converter,
        convert_checkpoint,
    )
    from docvec._tools._tiny_checkpoint import CheckpointGeometry, build_checkpoint
    from docvec._tools._tiny_qwen3vl import Qwen3VLGeometry
    from docvec._tools._tiny_qwen25vl import Qwen25VLGeometry
    from docvec._tools._tiny_qwen35 import ColQwen35Geometry
    from docvec._tools._toolchain import LlamaCppSource

    src = LlamaCppSource.in_cache(cache)
    base = cache / "models" / FAMILIES[family][int(full)]
    hf = base / "hf"
    done = base / "built.stamp"  # written last: an interrupted build is redone, not half-used
    if not done.is_file():
        shutil.rmtree(base, ignore_errors=True)
        print(
            f"building the {'full-geometry' if full else 'tiny'} {family} checkpoint in {hf} (once) ...",
            flush=True,
        )
        geometries: dict[str, tuple[CheckpointGeometry, CheckpointGeometry]] = {
            "jina-v4": (Qwen25VLGeometry.tiny(), Qwen25VLGeometry.qwen25vl_3b()),
            "qwen3-vl": (Qwen3VLGeometry.tiny(), Qwen3VLGeometry.qwen3vl_2b()),
            "colqwen3.5": (ColQwen35Geometry.tiny(), ColQwen35Geometry.flash()),
        }
        geometry = geometries[family][int(full)]
        build_checkpoint(
            hf,
            src.qwen2_vocab,
            geometry,
            dtype="bfloat16" if full else "float32",
            cache_dir=cache / "tokenizers",
        )
        done.write_text("ok")
    out = {}
    for t in dict.fromkeys(["f16", *types]):  # F16 always: the Q8_0 rows are made from it
        d = base / t
        lm, mm = d / f"m-{t.upper()}.gguf", d / f"mmproj-m-{t.upper()}.gguf"
        if not (d / "converted.stamp").is_file():
            print(f"converting to {t.upper()} GGUFs (once) ...", flush=True)
            convert_checkpoint(hf, d, source=src, name="m", outtype=t)  # type: ignore[arg-type]
            (d / "converted.stamp").write_text("ok")
        out[f"docvec {t.upper()}"] = (lm, mm)
    # Q8_0 language model (the vision encoder stays F16): the quantized choice, timed on this CPU's kernels
    lm16, mm16 = out["docvec F16"]
    q8 = base / "f16" / "Q8_0" / "m-Q8_0.gguf"
    if not q8.is_file():
        print("quantizing the language model to Q8_0 (once) ...", flush=True)
        q8.parent.mkdir(exist_ok=True)
        _quantize(lm16, q8, "Q8_0", os.cpu_count() or 1)
    out["docvec Q8_0"] = (q8, mm16)
    # a Q8_0 vision encoder beside the default language model (`models convert --mmproj-outtype q8_0`)
    mm8 = base / "mmproj-q8_0" / "mmproj-m-Q8_0.gguf"
    if not mm8.is_file():
        print("converting the vision encoder to Q8_0 (once) ...", flush=True)
        mm8.parent.mkdir(exist_ok=True)
        with _converter_view(hf, mm8.parent) as view:  # the checkpoint as the converter reads it
            _run_converter(src, view, mm8, "q8_0", mmproj=True)
    main_lm = out[f"docvec {types[0].upper()}"][0]
    out["docvec Q8_0 mmproj"] = (main_lm, mm8)
    return hf, out


def _cos(a: list[float], b: list[float]) -> float:
    import numpy as np

    x, y = np.asarray(a), np.asarray(b)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="the real geometries (random weights)")
    ap.add_argument("--family", choices=list(FAMILIES), help="one family only (default: all)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--skip-fp32", action="store_true", help="skip torch fp32 (needs ~22 GB at full size)")
    ap.add_argument(
        "--baseline-libs",
        type=Path,
        help="a folder of llama.cpp libraries (libllama, libmtmd, libggml*) to run the default GGUFs on too",
    )
    ap.add_argument(
        "--types",
        help="the GGUF types to run, the default engine first, comma-separated (default: this CPU's default "
        "type, `docvec models convert`'s: bf16 and f16 where the CPU has bf16 arithmetic, else f16)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
        return
    if args.types and not set(args.types.split(",")) <= {"f16", "bf16", "f32"}:
        ap.error(f"--types {args.types}: each must be f16, bf16 or f32 (the converter's --outtype)")

    from docvec import Settings

    cache = Settings().cache_dir
    for family in [args.family] if args.family else list(FAMILIES):
        _family_table(family, args, cache)


def _family_table(family: str, args: argparse.Namespace, cache: Path) -> None:
    from docvec._tools._convert import default_outtype

    types = args.types.split(",") if args.types else [default_outtype()]
    hf, ggufs = _models(family, args.full, cache, types)
    engines: dict[str, dict[str, Any]] = {}
    # a late-interaction model's head, exported beside the F16 conversion; every docvec engine uses it
    head = hf.parent / "f16" / "multivector-head.gguf"
    for name, (lm, mm) in ggufs.items():
        engines[name] = {"engine": "docvec", "lm": str(lm), "mmproj": str(mm), "threads": args.threads}
        if head.is_file():
            engines[name]["head"] = str(head)
    default = f"docvec {types[0].upper()}"
    if args.baseline_libs:
        if not (args.baseline_libs / "libllama.so").is_file():
            raise SystemExit(f"--baseline-libs {args.baseline_libs}: no libllama.so there")
        engines["baseline " + default.removeprefix("docvec ")] = {
            **engines[default],
            "libs": str(args.baseline_libs.resolve()),
        }
    if family == "qwen3-vl":
        # on the CPU a BF16 language model attends with flash attention over a BF16 KV cache (on AMX tiles
        # where the CPU has them, patch 0009); the profile's own choice, which GPUs keep (flash attention
        # off over an F16 cache, for parity), and flash attention over an F16 cache, side by side
        lm, mm = ggufs[default]
        base = {"engine": "docvec", "lm": str(lm), "mmproj": str(mm), "threads": args.threads}
        if default != "docvec F16":  # F16 weights keep the profile's attention: that row is the default's
            engines["docvec FA off, F16 KV"] = {**base, "flash_attention": False, "kv_cache": "f16"}
        engines["docvec FA on, F16 KV"] = {**base, "flash_attention": True, "kv_cache": "f16"}
        # the cost of the model's own maximum page budget (1,800 tokens) against docvec's default (1,024)
        from docvec._model._profiles import QWEN3_VL_EMBEDDING

        engines["docvec 1800 tok"] = {
            "engine": "docvec",
            "lm": str(lm),
            "mmproj": str(mm),
            "threads": args.threads,
            "max_pixels": QWEN3_VL_EMBEDDING.max_pixels,
        }
    torch_spec = {"engine": "torch", "family": family, "hf": str(hf), "threads": args.threads}
    engines["torch bf16"] = {**torch_spec, "dtype": "bf16"}
    if not args.skip_fp32:
        engines["torch fp32"] = {**torch_spec, "dtype": "fp32"}

    results = {}
    for name, spec in engines.items():
        print(f"running {family}: {name} ...", flush=True)
        results[name] = _run_engine(spec)

    geometry = GEOMETRIES[family] if args.full else "tiny"
    print(
        f"\n{family}, {geometry} geometry, {args.threads} threads; seconds (median of "
        f"{len(QUERIES)} queries; one run per image), peak RSS; x = time relative to {default}\n"
    )
    header = f"{'engine':<19}{'query s':>10}"
    for n, _, _ in IMAGES:
        header += f"{n + ' (vision+LM) s':>40}"
    print(header + f"{'peak RSS MB':>14}")
    base = results.get(default, {})
    for name, r in results.items():
        if "error" in r:
            print(f"{name:<19} failed: {r['error']}")
            continue
        q = statistics.median(r["queries"])
        row = f"{name:<19}{q:>10.4f}"
        if "queries" in base:
            row += f" ({q / statistics.median(base['queries']):.2f}x)"
        for n, _, _ in IMAGES:
            im = r["images"][n]
            tot = im["vision_s"] + im["lm_s"]
            cell = f"{tot:.2f} ({im['vision_s']:.2f}+{im['lm_s']:.2f})"
            if "images" in base:
                b = base["images"][n]
                cell += f" {tot / (b['vision_s'] + b['lm_s']):.2f}x"
            row += f"{cell:>40}"
        print(row + f"{r['peak_rss_mb']:>14.0f}")

    print(
        "\nprompt tokens per image: "
        + "; ".join(
            f"{name} " + "/".join(str(r["images"][n]["tokens"]) for n, _, _ in IMAGES)
            for name, r in results.items()
            if "error" not in r
        )
    )
    ref = results.get("torch fp32") or results.get("torch bf16")
    if ref and "error" not in ref:
        which = "torch fp32" if "torch fp32" in results else "torch bf16"
        print(f"\npooled cosine against {which} (parity):")
        for name, r in results.items():
            if name == which or "error" in r or engines[name].get("max_pixels"):  # other tokens
                continue
            cs = [_cos(r["query_vec"], ref["query_vec"])] + [
                _cos(r["images"][n]["vec"], ref["images"][n]["vec"]) for n, _, _ in IMAGES
            ]
            print(
                f"  {name:<19} query {cs[0]:.7f}  "
                + "  ".join(f"{n} {c:.7f}" for (n, _, _), c in zip(IMAGES, cs[1:], strict=True))
            )


if __name__ == "__main__":
    main()
