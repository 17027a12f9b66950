"""Qwen2.5-VL, jina-embeddings-v4's backbone, as :func:`~._tiny_checkpoint.build_checkpoint` writes it.

Beside Qwen2.5-VL's own weights the checkpoint holds jina-embeddings-v4's multi-vector head under its real
names (``multi_vector_projector.weight`` [128, text hidden], ``.bias`` [128]), initialised like the other
linear layers: transformers' Qwen2.5-VL ignores them (reported as unexpected keys), llama.cpp's converter
cannot map them (``docvec models convert`` exports them to a head file of their own), and the reference
reads them straight from the safetensors file.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, ClassVar

from .._errors import ConfigError
from .._model._head import KEYS as HEAD_KEYS
from .._model._profiles import JINA_V4
from ._qwen_tokenizer import ID_ENDOFTEXT, ID_IM_END, QWEN25VL_ADDED_TOKENS, VOCAB_SIZE
from ._random_weights import TensorSpec, tensor_specs

__all__ = ["ADDED_TOKENS", "HEAD_DIM", "IMAGE_MEAN", "IMAGE_STD", "Qwen25VLGeometry"]

#: Qwen2.5-VL's added tokens in id order from 151643, with whether transformers treats each as special.
ADDED_TOKENS = QWEN25VL_ADDED_TOKENS

#: Qwen2-VL's image normalisation (the OpenAI CLIP values).
IMAGE_MEAN = (0.48145466, 0.4578275, 0.40821073)
IMAGE_STD = (0.26862954, 0.26130258, 0.27577711)

#: Size of the multi-vector head's token vectors (jina-embeddings-v4's ``multi_vector_projector_dim``).
HEAD_DIM = 128


@dataclass(frozen=True)
class Qwen25VLGeometry:
    """The widths of a Qwen2.5-VL model; everything else (vocabulary, special ids) is the real one."""

    label: ClassVar[str] = "Qwen2.5-VL"
    added_tokens: ClassVar[tuple[tuple[str, bool], ...]] = QWEN25VL_ADDED_TOKENS
    processor_class: ClassVar[str] = "Qwen2_5_VLProcessor"

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
    def tiny(cls) -> Qwen25VLGeometry:
        """A model small enough to build and run in seconds (~10 M parameters, most in the embedding)."""
        return cls(*_GEOMETRIES["tiny"])

    @classmethod
    def qwen25vl_3b(cls) -> Qwen25VLGeometry:
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
                "bos_token_id": ID_ENDOFTEXT,
                "eos_token_id": ID_IM_END,
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

    def transformers_config(self, dtype: str = "float32") -> Any:
        """The ``Qwen2_5_VLConfig`` of :meth:`hf_config`."""
        from transformers import Qwen2_5_VLConfig

        return Qwen2_5_VLConfig(**self.hf_config(dtype))

    def stored_tensors(self, config: Any) -> list[TensorSpec]:
        """Every stored tensor of the architecture, named as transformers saves Qwen2.5-VL checkpoints, and
        the multi-vector head, named as jina-embeddings-v4 saves it."""
        import torch
        from transformers import Qwen2_5_VLForConditionalGeneration

        with torch.device("meta"):
            model = Qwen2_5_VLForConditionalGeneration(config)
        specs = list(tensor_specs(model, _stored_name))
        # jina-embeddings-v4's late-interaction head on the last hidden state, saved where its model saves
        # it (top level, beside the Qwen2.5-VL weights); "weight" and "bias" give it a linear layer's scales.
        specs.append(TensorSpec(HEAD_KEYS[0], (HEAD_DIM, self.text_hidden), "weight"))
        specs.append(TensorSpec(HEAD_KEYS[1], (HEAD_DIM,), "bias"))
        return specs

    def preprocessor_config(self) -> dict[str, Any]:
        """Qwen2.5-VL's image processor with jina-embeddings-v4's pixel bounds."""
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
            "merge_size": self.spatial_merge_size,
            "min_pixels": min_pixels,
            "patch_size": self.patch_size,
            "processor_class": self.processor_class,
            "resample": 3,
            "rescale_factor": 1 / 255,
            "size": {"longest_edge": max_pixels, "shortest_edge": min_pixels},
            "temporal_patch_size": self.temporal_patch_size,
        }


# The geometries docvec builds, one Qwen25VLGeometry each: its first fields, in order.
# fmt: off
_GEOMETRIES: dict[str, tuple[Any, ...]] = {
    #                 text ------------------------------------------ vision ------------------------------
    #                 hidden layers heads kv inter  mrope         depth hidden heads inter full-attention
    "tiny":          (64,    2,    4,   2,  128,  (2, 3, 3),     4,   64,    4,    128, (1, 3)),
    "qwen2.5-vl-3b": (2048, 36,   16,   2, 11008, (16, 24, 24), 32, 1280,   16,   3420, (7, 15, 23, 31)),
}
# fmt: on


def _stored_name(name: str) -> str:
    for prefix, stored in (("model.language_model.", "model."), ("model.visual.", "visual.")):
        if name.startswith(prefix):
            return stored + name[len(prefix) :]
    return name
