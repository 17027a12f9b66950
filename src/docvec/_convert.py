"""Hugging Face checkpoint -> GGUF language model + GGUF mmproj, with the tools users run on real models.

Conversion runs llama.cpp's own ``convert_hf_to_gguf.py`` from the pinned source; quantization calls
llama.cpp's ``llama_model_quantize``. Each output folder is a complete model (one language model and its
mmproj), so it can be passed to ``--model`` as it is::

    OUT/jina-v4-BF16.gguf  OUT/mmproj-jina-v4-BF16.gguf      # --outtype
    OUT/Q8_0/jina-v4-Q8_0.gguf  OUT/Q8_0/mmproj-...gguf      # --quantize Q8_0 (mmproj hard-linked)
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ._errors import ToolError
from ._modelfiles import ModelFiles, read_gguf_info
from ._toolchain import LlamaCppSource

__all__ = ["OUTTYPES", "QUANTS", "ConvertedModel", "convert_checkpoint", "cpu_has_bf16", "default_outtype"]

log = logging.getLogger("docvec")

OutType = Literal["f16", "bf16", "f32"]
OUTTYPES: tuple[str, ...] = ("f16", "bf16", "f32")
#: llama_ftype values of the quantizations docvec offers (llama.h).
QUANTS: dict[str, int] = {"Q8_0": 7, "Q6_K": 18, "Q5_K_M": 17, "Q4_K_M": 15}


@dataclass(frozen=True)
class ConvertedModel:
    """The model folders a conversion produced: the main one, and one per quantization."""

    main: ModelFiles
    quantized: dict[str, ModelFiles] = field(default_factory=dict)


def cpu_has_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (x86 AVX512-BF16/AMX, or Arm's BF16 extension)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16", "bf16"))


def default_outtype() -> OutType:
    """BF16 where the CPU has bf16 arithmetic (measured ~1.5x faster than F16 there), else F16."""
    return "bf16" if cpu_has_bf16() else "f16"


def convert_checkpoint(
    hf_dir: Path,
    out_dir: Path,
    *,
    source: LlamaCppSource,
    name: str | None = None,
    outtype: OutType = "f16",
    mmproj_outtype: OutType | None = None,
    quantize: tuple[str, ...] = (),
    threads: int | None = None,
) -> ConvertedModel:
    """Convert a Qwen2.5-VL checkpoint folder into a GGUF language model and mmproj under ``out_dir``."""
    if not (hf_dir / "config.json").is_file():
        raise ToolError(f"{hf_dir}: not a Hugging Face checkpoint folder (no config.json)")
    if outtype not in OUTTYPES:
        raise ToolError(f"--outtype must be one of {', '.join(OUTTYPES)}, not {outtype}")
    bad = [q for q in quantize if q not in QUANTS]
    if bad:
        raise ToolError(f"unknown quantization {', '.join(bad)}; choose from {', '.join(QUANTS)}")
    name = name or hf_dir.resolve().name
    mm_type = mmproj_outtype or outtype
    out_dir.mkdir(parents=True, exist_ok=True)
    lm = out_dir / f"{name}-{outtype.upper()}.gguf"
    mm = out_dir / f"mmproj-{name}-{mm_type.upper()}.gguf"
    _run_converter(source, hf_dir, lm, outtype, mmproj=False)
    _run_converter(source, hf_dir, mm, mm_type, mmproj=True)
    main = ModelFiles(lm, mm)
    quantized = {}
    for q in quantize:
        qdir = out_dir / q
        qdir.mkdir(exist_ok=True)
        qlm = qdir / f"{name}-{q}.gguf"
        _quantize(lm, qlm, q, threads or os.cpu_count() or 1)
        quantized[q] = ModelFiles(qlm, _link(mm, qdir / mm.name))
    return ConvertedModel(main, quantized)


def _run_converter(source: LlamaCppSource, hf_dir: Path, out: Path, outtype: str, *, mmproj: bool) -> None:
    tmp = out.with_name(out.name + ".part")
    cmd = [sys.executable, str(source.converter), str(hf_dir), "--outfile", str(tmp), "--outtype", outtype]
    if mmproj:
        cmd.append("--mmproj")
    log.info("converting %s -> %s", hf_dir, out)
    # NO_LOCAL_GGUF unset: the converter uses the gguf-py it ships with, matching its own code.
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        what = "mmproj" if mmproj else "language model"
        raise ToolError(f"converting {hf_dir} ({what}) failed (exit {proc.returncode}):\n{tail}")
    tmp.replace(out)
    read_gguf_info(out)  # the converter's output must itself pass docvec's checks


def _quantize(src: Path, dst: Path, quant: str, threads: int) -> None:
    from ._llama import quantize

    tmp = dst.with_name(dst.name + ".part")
    log.info("quantizing %s -> %s", src, dst)
    try:
        quantize(src, tmp, QUANTS[quant], threads=threads)
    except Exception as e:
        tmp.unlink(missing_ok=True)
        raise ToolError(f"quantizing {src} to {quant} failed: {e}") from e
    tmp.replace(dst)


def _link(src: Path, dst: Path) -> Path:
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)
    except OSError:  # another file system: copy instead
        import shutil

        shutil.copyfile(src, dst)
    return dst
