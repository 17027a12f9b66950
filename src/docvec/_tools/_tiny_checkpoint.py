"""A random-weight checkpoint of a real architecture, written as a Hugging Face checkpoint folder.

Offline tests and demos need models that go through the same code paths as the real ones (the converter,
llama.cpp's graphs, the transformers reference) without a download. :func:`build_checkpoint` writes one for
any architecture described by a :class:`CheckpointGeometry` (:mod:`._tiny_qwen25vl` for
jina-embeddings-v4's Qwen2.5-VL, :mod:`._tiny_qwen3vl` for Qwen3-VL-Embedding), deterministically: the same
arguments give byte-identical files.

The tokenizer is the real Qwen2 byte-level BPE with the architecture's added tokens at their real ids
(:mod:`._qwen_tokenizer`); the weights are random and scale-preserving (:mod:`._random_weights`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar, Protocol

from .._errors import ConfigError
from .._fileio import write_atomic, write_json_atomic
from ._qwen_tokenizer import ID_ENDOFTEXT, ID_IM_END, qwen_tokenizer_json, tokenizer_files
from ._random_weights import TensorSpec, write_weights

__all__ = ["DTYPES", "CheckpointGeometry", "build_checkpoint"]

logger = logging.getLogger("docvec")

#: the weight types a checkpoint can be written in
DTYPES = ("float32", "float16", "bfloat16")


class CheckpointGeometry(Protocol):
    """What :func:`build_checkpoint` needs to know of an architecture: its widths and how it is saved."""

    #: the architecture's name in messages (``Qwen2.5-VL``)
    label: ClassVar[str]
    #: the added tokens in id order from 151643, with whether transformers treats each as special
    added_tokens: ClassVar[tuple[tuple[str, bool], ...]]
    #: the ``processor_class`` its tokenizer_config.json names
    processor_class: ClassVar[str]

    def hf_config(self, dtype: str = "float32") -> dict[str, Any]:
        """The transformers config's keyword arguments."""
        ...

    def preprocessor_config(self) -> dict[str, Any]:
        """preprocessor_config.json: the image processor of the model it stands in for."""
        ...

    def stored_tensors(self, config: Any) -> list[TensorSpec]:
        """Every tensor the checkpoint stores, under the names the real checkpoint uses."""
        ...

    def transformers_config(self, dtype: str) -> Any:
        """The transformers config object of :meth:`hf_config` (imports transformers)."""
        ...


def build_checkpoint(
    out_dir: Path,
    vocab_gguf: Path,
    geometry: CheckpointGeometry,
    seed: int = 0,
    dtype: str = "bfloat16",
    *,
    cache_dir: Path | None = None,
) -> Path:
    """Write a random-weight checkpoint of ``geometry`` to ``out_dir`` and return ``out_dir``.

    ``dtype`` is ``float32``, ``float16`` or ``bfloat16``. The default is ``bfloat16`` because both
    families are published in it: its weights convert to F16 GGUFs unrounded (bfloat16's 8 mantissa bits
    fit in float16's 10; only magnitudes under float16's normal range, 6.1e-5, move, by at most 3e-8), so
    parity tests on F16 GGUFs measure llama.cpp's arithmetic, as they would on the real model, not a
    rounding of float32 weights that no user's model has.

    The folder holds config.json, generation_config.json, the weights (one model.safetensors, or shards of
    at most 2 GiB with an index), tokenizer.json, tokenizer_config.json, special_tokens_map.json and
    preprocessor_config.json. Weights are generated tensor by tensor from ``seed`` and the tensor's name, so
    the same arguments give byte-identical files and memory stays bounded by one shard. ``vocab_gguf`` is
    llama.cpp's Qwen2 vocabulary the tokenizer is rebuilt from; ``cache_dir`` keeps the rebuilt tokenizer.
    """
    if dtype not in DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    out_dir = Path(out_dir)
    tokenizer_json = qwen_tokenizer_json(vocab_gguf, geometry.added_tokens, cache_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    import torch

    config = geometry.transformers_config(dtype)
    config.save_pretrained(out_dir)
    write_json_atomic(
        out_dir / "generation_config.json",
        {
            "bos_token_id": ID_ENDOFTEXT,
            "eos_token_id": [ID_IM_END, ID_ENDOFTEXT],
            "pad_token_id": ID_ENDOFTEXT,
        },
    )
    write_atomic(out_dir / "tokenizer.json", tokenizer_json.encode("utf-8"))
    for name, content in tokenizer_files(geometry.added_tokens, geometry.processor_class).items():
        write_json_atomic(out_dir / name, content)
    write_json_atomic(out_dir / "preprocessor_config.json", geometry.preprocessor_config())
    write_weights(out_dir, geometry.stored_tensors(config), seed, getattr(torch, dtype))
    logger.info("wrote a random %s %s checkpoint to %s", dtype, geometry.label, out_dir)
    return out_dir
