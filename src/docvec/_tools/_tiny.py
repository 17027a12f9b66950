"""The offline test model end to end: a random-weight checkpoint and the GGUFs converted from it, with its
multi-vector head (``multivector-head.gguf``) beside them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from .._errors import ToolError
from .._model._files import ModelFiles
from .._model._registry import TINY_NAME, TINY_STAMP, find_tiny_model, tiny_stamp
from ._convert import OutType, convert_checkpoint
from ._toolchain import LlamaCppSource

__all__ = ["build_tiny_model"]

log = logging.getLogger("docvec")


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
    stamp = out_dir / TINY_STAMP
    source = LlamaCppSource.in_cache(cache_dir)
    for old in out_dir.glob("*.gguf"):
        old.unlink()
    stamp.unlink(missing_ok=True)
    log.info("building the tiny test model in %s", out_dir)
    build_checkpoint(out_dir / "hf", source.qwen2_vocab, seed=seed, cache_dir=cache_dir / "tokenizers")
    files = convert_checkpoint(out_dir / "hf", out_dir, source=source, name=TINY_NAME, outtype=outtype).main
    if files.head is None:  # the checkpoint was written with one: its export must not go missing silently
        raise ToolError(f"converting the tiny model in {out_dir} gave no multi-vector head")
    stamp.write_text(json.dumps(tiny_stamp(seed, outtype)))
    return files
