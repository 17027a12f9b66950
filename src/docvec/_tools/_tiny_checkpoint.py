"""A random-weight Qwen2.5-VL of the real architecture, written as a Hugging Face checkpoint folder.

Offline tests and demos need a model that goes through the same code paths as jina-embeddings-v4 (the
converter, llama.cpp's Qwen2.5-VL graphs, the transformers reference) without downloading 7.5 GB.
:func:`build_checkpoint` writes one, deterministically: the same seed gives byte-identical files.

The tokenizer is the real Qwen2 byte-level BPE with the Qwen2.5-VL added tokens at their real ids
(:mod:`docvec._tools._qwen_tokenizer`); the weights are random and scale-preserving
(:mod:`docvec._tools._random_weights`).

Beside Qwen2.5-VL's own weights the checkpoint holds jina-embeddings-v4's multi-vector head under its real
names (``multi_vector_projector.weight`` [128, text hidden], ``.bias`` [128]), initialised like the other
linear layers: transformers' Qwen2.5-VL ignores them (reported as unexpected keys), llama.cpp's converter
cannot map them (``docvec models convert`` exports them to a head file of their own), and the reference
reads them straight from the safetensors file.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from .._fileio import write_atomic, write_json_atomic
from .._model._head import KEYS as HEAD_KEYS
from .._model._profiles import JINA_V4
from ._qwen_tokenizer import QWEN2_PRETOKENIZE_REGEX, QWEN25VL_ADDED_TOKENS, VOCAB_SIZE, qwen_tokenizer_json
from ._qwen_tokenizer import tokenizer_files as _tokenizer_files
from ._random_weights import TensorSpec, tensor_specs, write_weights

__all__ = [
    "ADDED_TOKENS",
    "HEAD_DIM",
    "IMAGE_MEAN",
    "IMAGE_STD",
    "QWEN2_PRETOKENIZE_REGEX",
    "VOCAB_SIZE",
    "ModelGeometry",
    "build_checkpoint",
    "qwen25vl_tokenizer_json",
]

logger = logging.getLogger("docvec")

#: Qwen2.5-VL's added tokens in id order from 151643, with whether transformers treats each as special.
ADDED_TOKENS = QWEN25VL_ADDED_TOKENS

#: Qwen2-VL's image normalisation (the OpenAI CLIP values).
IMAGE_MEAN = (0.48145466, 0.4578275, 0.40821073)
IMAGE_STD = (0.26862954, 0.26130258, 0.27577711)

#: Size of the multi-vector head's token vectors (jina-embeddings-v4's ``multi_vector_projector_dim``).
HEAD_DIM = 128

_ID_ENDOFTEXT = 151643
_ID_IM_END = 151645

#: the weight types a checkpoint can be written in
DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class ModelGeometry:
    """The widths of a Qwen2.5-VL model; everything else (vocabulary, special ids) is the real one."""

    text_hidden: int
    text_layers: int
    text_heads: int
    text_kv_heads: int
    text_intermediate: int
    mrope_section: tuple[int, int, int]
    vision_depth: int
    vision_hidden: int
    vision_heads: int
    vision_intermediate: int
    fullatt_block_indexes: tuple[int, ...]
    patch_size: int = 14
    spatial_merge_size: int = 2
    temporal_patch_size: int = 2
    window_size: int = 112
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    max_position_embeddings: int = 128_000
    tokens_per_second: int = 2

    def __post_init__(self) -> None:
        if self.text_hidden % self.text_heads or self.text_heads % self.text_kv_heads:
            raise ConfigError(
                f"text: hidden {self.text_hidden}, heads {self.text_heads} and KV heads {self.text_kv_heads} "
                "must divide evenly"
            )
        head_dim = self.text_hidden // self.text_heads
        if sum(self.mrope_section) * 2 != head_dim:
            raise ConfigError(
                f"mrope_section {self.mrope_section} must sum to head_dim / 2 = {head_dim // 2}"
            )
        if self.vision_hidden % self.vision_heads:
            raise ConfigError(
                f"vision: hidden {self.vision_hidden} is not a multiple of {self.vision_heads} heads"
            )
        blocks = self.fullatt_block_indexes
        if not blocks or any(b >= self.vision_depth for b in blocks):
            raise ConfigError(
                f"fullatt_block_indexes {blocks} must be non-empty and below {self.vision_depth}"
            )
        # convert_hf_to_gguf.py derives one window-attention period from them and rejects anything else.
        period = blocks[0] + 1
        if any(b - a != period for a, b in itertools.pairwise(blocks)):
            raise ConfigError(f"fullatt_block_indexes {blocks} must be equally spaced, every {period} blocks")

    @property
    def out_hidden(self) -> int:
        """Width of the vision merger's output: the language model's hidden size."""
        return self.text_hidden

    @classmethod
    def tiny(cls) -> ModelGeometry:
        """A model small enough to build and run in seconds (~10 M parameters, most in the embedding)."""
        return cls(*_GEOMETRIES["tiny"])

    @classmethod
    def qwen25vl_3b(cls) -> ModelGeometry:
        """Qwen2.5-VL-3B-Instruct, the backbone of jina-embeddings-v4 (3.75 B parameters)."""
        return cls(*_GEOMETRIES["qwen2.5-vl-3b"])

    def hf_config(self, dtype: str = "float32") -> dict[str, Any]:
        """The ``Qwen2_5_VLConfig`` keyword arguments for this geometry (real token ids, tied embeddings)."""
        return {
            "architectures": ["Qwen2_5_VLForConditionalGeneration"],
            "text_config": {
                "vocab_size": VOCAB_SIZE,
                "hidden_size": self.text_hidden,
                "intermediate_size": self.text_intermediate,
                "num_hidden_layers": self.text_layers,
                "num_attention_heads": self.text_heads,
                "num_key_value_heads": self.text_kv_heads,
                "hidden_act": "silu",
                "max_position_embeddings": self.max_position_embeddings,
                "rms_norm_eps": self.rms_norm_eps,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": self.rope_theta,
                    "mrope_section": list(self.mrope_section),
                },
                "tie_word_embeddings": True,
                "bos_token_id": _ID_ENDOFTEXT,
                "eos_token_id": _ID_IM_END,
            },
            "vision_config": {
                "depth": self.vision_depth,
                "hidden_size": self.vision_hidden,
                "intermediate_size": self.vision_intermediate,
                "num_heads": self.vision_heads,
                "hidden_act": "silu",
                "in_channels": 3,
                "out_hidden_size": self.out_hidden,
                "patch_size": self.patch_size,
                "spatial_merge_size": self.spatial_merge_size,
                "temporal_patch_size": self.temporal_patch_size,
                "window_size": self.window_size,
                "fullatt_block_indexes": list(self.fullatt_block_indexes),
                "tokens_per_second": self.tokens_per_second,
            },
            "image_token_id": 151655,
            "video_token_id": 151656,
            "vision_start_token_id": 151652,
            "vision_end_token_id": 151653,
            "tie_word_embeddings": True,
            "dtype": dtype,
        }


# The geometries docvec builds, one ModelGeometry each: its first fields, in order.
# fmt: off
_GEOMETRIES: dict[str, tuple[Any, ...]] = {
    #                 text ------------------------------------------ vision ------------------------------
    #                 hidden layers heads kv inter  mrope         depth hidden heads inter full-attention
    "tiny":          (64,    2,    4,   2,  128,  (2, 3, 3),     4,   64,    4,    128, (1, 3)),
    "qwen2.5-vl-3b": (2048, 36,   16,   2, 11008, (16, 24, 24), 32, 1280,   16,   3420, (7, 15, 23, 31)),
}
# fmt: on


def qwen25vl_tokenizer_json(vocab_gguf: Path, cache_dir: Path | None = None) -> str:
    """The ``tokenizer.json`` text of Qwen2.5-VL's tokenizer (see :func:`qwen_tokenizer_json`)."""
    return qwen_tokenizer_json(vocab_gguf, QWEN25VL_ADDED_TOKENS, cache_dir)


def build_checkpoint(
    out_dir: Path,
    vocab_gguf: Path,
    geometry: ModelGeometry | None = None,
    seed: int = 0,
    dtype: str = "bfloat16",
    *,
    cache_dir: Path | None = None,
) -> Path:
    """Write a random-weight Qwen2.5-VL checkpoint folder to ``out_dir`` and return ``out_dir``.

    ``geometry`` defaults to :meth:`ModelGeometry.tiny`; ``dtype`` is ``float32``, ``float16`` or
    ``bfloat16``. The default is ``bfloat16`` because jina-embeddings-v4 is published in it: its weights
    convert to F16 GGUFs unrounded (bfloat16's 8 mantissa bits fit in float16's 10; only magnitudes under
    float16's normal range, 6.1e-5, move, by at most 3e-8), so parity tests on F16 GGUFs measure llama.cpp's
    arithmetic, as they would on the real model, not a rounding of float32 weights that no user's model has.

    The folder holds config.json, generation_config.json, the weights (one model.safetensors, or shards of
    at most 2 GiB with an index), tokenizer.json, tokenizer_config.json, special_tokens_map.json and
    preprocessor_config.json (jina-embeddings-v4's pixel bounds). The weights include the multi-vector head
    (``multi_vector_projector.weight`` [128, text hidden] and ``.bias`` [128], as jina-embeddings-v4 names
    them), which the Qwen2.5-VL model itself does not use. Weights are generated tensor by tensor from
    ``seed`` and the tensor's name, so the same arguments give byte-identical files and memory stays bounded
    by one shard. ``cache_dir`` keeps the rebuilt tokenizer (see :func:`qwen25vl_tokenizer_json`).
    """
    geometry = ModelGeometry.tiny() if geometry is None else geometry
    if dtype not in DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    out_dir = Path(out_dir)
    tokenizer_json = qwen25vl_tokenizer_json(vocab_gguf, cache_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    import torch
    from transformers import Qwen2_5_VLConfig

    config = Qwen2_5_VLConfig(**geometry.hf_config(dtype))
    config.save_pretrained(out_dir)
    write_json_atomic(
        out_dir / "generation_config.json",
        {
            "bos_token_id": _ID_ENDOFTEXT,
            "eos_token_id": [_ID_IM_END, _ID_ENDOFTEXT],
            "pad_token_id": _ID_ENDOFTEXT,
        },
    )
    write_atomic(out_dir / "tokenizer.json", tokenizer_json.encode("utf-8"))
    for name, content in _tokenizer_files(QWEN25VL_ADDED_TOKENS, "Qwen2_5_VLProcessor").items():
        write_json_atomic(out_dir / name, content)
    write_json_atomic(out_dir / "preprocessor_config.json", _preprocessor_config(geometry))

    torch_dtype = getattr(torch, dtype)
    specs = list(_tensor_specs(config))
    write_weights(out_dir, specs, seed, torch_dtype)
    logger.info("wrote a random %s Qwen2.5-VL checkpoint to %s", dtype, out_dir)
    return out_dir


def _tensor_specs(config: Any) -> list[TensorSpec]:
    """Every stored tensor of the architecture, named as transformers saves Qwen2.5-VL checkpoints, and the
    multi-vector head, named as jina-embeddings-v4 saves it."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    with torch.device("meta"):
        model = Qwen2_5_VLForConditionalGeneration(config)
    specs = list(tensor_specs(model, _stored_name))
    # jina-embeddings-v4's late-interaction head on the last hidden state, saved where its model saves it
    # (top level, beside the Qwen2.5-VL weights); "weight" and "bias" give it a linear layer's scales.
    specs.append(TensorSpec(HEAD_KEYS[0], (HEAD_DIM, int(config.text_config.hidden_size)), "weight"))
    specs.append(TensorSpec(HEAD_KEYS[1], (HEAD_DIM,), "bias"))
    return specs


def _stored_name(name: str) -> str:
    for prefix, stored in (("model.language_model.", "model."), ("model.visual.", "visual.")):
        if name.startswith(prefix):
            return stored + name[len(prefix) :]
    return name


def _preprocessor_config(geometry: ModelGeometry) -> dict[str, Any]:
    # the image bounds of the model this checkpoint stands in for
    min_pixels, max_pixels = JINA_V4.min_pixels, JINA_V4.max_pixels
    return {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(IMAGE_MEAN),
        "image_processor_type": "Qwen2VLImageProcessor",
        "image_std": list(IMAGE_STD),
        "max_pixels": max_pixels,
        "merge_size": geometry.spatial_merge_size,
        "min_pixels": min_pixels,
        "patch_size": geometry.patch_size,
        "processor_class": "Qwen2_5_VLProcessor",
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"longest_edge": max_pixels, "shortest_edge": min_pixels},
        "temporal_patch_size": geometry.temporal_patch_size,
    }
