"""A checkpoint loaded whole for a reference: the one way every reference loads its model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from docvec import ModelError, ModelNotFoundError

__all__ = ["load_checkpoint"]


def load_checkpoint(
    model_class: Any, hf_dir: Path, what: str, *, dtype: torch.dtype, threads: int | None
) -> tuple[Any, Any]:
    """``model_class`` from the checkpoint folder ``hf_dir`` in ``dtype``, in eval mode, and its tokenizer.

    :class:`~docvec.ModelNotFoundError` when ``hf_dir`` is no checkpoint folder; :class:`~docvec.ModelError`
    (naming ``what`` it should be) when it cannot be loaded, or when it lacks a weight the model needs: that
    weight would be left randomly initialised, and the reference would be no oracle. ``threads`` sets torch's
    intra-op thread count (a process-wide setting)."""
    from transformers import AutoTokenizer

    if not (hf_dir / "config.json").is_file():
        raise ModelNotFoundError(f"{hf_dir} is not a Hugging Face checkpoint folder (no config.json)")
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        model, info = model_class.from_pretrained(hf_dir, dtype=dtype, output_loading_info=True)
        tokenizer = AutoTokenizer.from_pretrained(hf_dir)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load the {what} checkpoint in {hf_dir}: {exc}") from exc
    missing = sorted(set(info.get("missing_keys", ())) | set(info.get("mismatched_keys", ())))
    if missing:
        raise ModelError(f"{hf_dir} lacks weights the model needs: {', '.join(missing[:5])}")
    model.eval()
    return model, tokenizer
