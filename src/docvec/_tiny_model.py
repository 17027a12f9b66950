"""The offline test model end to end: a random-weight checkpoint and the GGUFs converted from it, with its
multi-vector head (``multivector-head.gguf``) beside them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ._convert import OutType, convert_checkpoint
from ._errors import ToolError
from ._modelfiles import ModelFiles
from ._mvhead import FILE_NAME as HEAD_FILE
from ._toolchain import LlamaCppSource

__all__ = ["REGISTRY_NAME", "TINY_NAME", "build_tiny_model", "find_tiny_model", "tiny_model_dir"]

log = logging.getLogger("docvec")

#: the base name of the tiny model's files
TINY_NAME = "tiny-qwen25vl"
#: its name as a model setting (``DOCVEC_MODEL=tiny``): the build in the cache folder
REGISTRY_NAME = "tiny"
_STAMP = "docvec-tiny.json"


def tiny_model_dir(cache_dir: Path) -> Path:
    """Where ``docvec demo`` and ``docvec models pull tiny`` build the tiny model."""
    return cache_dir / "models" / "tiny"


def find_tiny_model(out_dir: Path, *, seed: int = 0, outtype: OutType = "f16") -> ModelFiles | None:
    """The tiny model built in ``out_dir`` with this seed and type, or ``None`` when there is none."""
    lm = out_dir / f"{TINY_NAME}-{outtype.upper()}.gguf"
    mm = out_dir / f"mmproj-{TINY_NAME}-{outtype.upper()}.gguf"
    head = out_dir / HEAD_FILE
    try:
        stamp = json.loads((out_dir / _STAMP).read_text())
    except (OSError, ValueError):
        return None
    if stamp == _stamp(seed, outtype) and lm.is_file() and mm.is_file() and head.is_file():
        return ModelFiles(lm, mm, head)
    return None


def _stamp(seed: int, outtype: str) -> dict[str, object]:
    # version 2: the checkpoint has the multi-vector head, and the folder its head file; 3: bfloat16 weights
    return {"seed": seed, "outtype": outtype, "version": 3}


def build_tiny_model(
    out_dir: Path, *, cache_dir: Path, seed: int = 0, outtype: OutType = "f16"
) -> ModelFiles:
    """Build (or reuse) the tiny random-weight Qwen2.5-VL under ``out_dir``: ``hf/`` plus two GGUFs and the
    multi-vector head (``multivector-head.gguf``, exported from the checkpoint by the conversion).

    Reused when ``out_dir`` already holds a build with the same seed and type, so the demo and the tests
    pay for it once.
    """
    try:
        from ._tiny_checkpoint import build_checkpoint
    except ImportError as e:
        raise ToolError(
            f"building the test model needs PyTorch and transformers ({e.name} is missing): "
            "pip install 'docvec[tools]'"
        ) from None
    built = find_tiny_model(out_dir, seed=seed, outtype=outtype)
    if built is not None:
        return built
    stamp = out_dir / _STAMP
    source = LlamaCppSource.in_cache(cache_dir)
    for old in out_dir.glob("*.gguf"):
        old.unlink()
    stamp.unlink(missing_ok=True)
    log.info("building the tiny test model in %s", out_dir)
    build_checkpoint(out_dir / "hf", source.qwen2_vocab, seed=seed, cache_dir=cache_dir / "tokenizers")
    files = convert_checkpoint(out_dir / "hf", out_dir, source=source, name=TINY_NAME, outtype=outtype).main
    if files.head is None:  # the checkpoint was written with one: its export must not go missing silently
        raise ToolError(f"converting the tiny model in {out_dir} gave no multi-vector head")
    stamp.write_text(json.dumps(_stamp(seed, outtype)))
    return files
