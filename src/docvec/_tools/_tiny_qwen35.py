"""ColQwen3.5 as :func:`~._tiny_checkpoint.build_checkpoint` writes it: a Qwen3.5 (hybrid language model of
Gated-DeltaNet linear-attention layers and full-attention layers, Qwen3-VL's vision tower without deepstack)
with colpali-engine's late-interaction head.

The offline stand-in for the VultronRetriever models: the same code paths (the converter's ``qwen35``
language model and ``qwen3vl_merger`` vision encoder, llama.cpp's recurrent layers, colpali-engine's
``ColQwen3_5`` as the reference) without a download. Its checkpoint is stored as colpali-engine saves a
``ColQwen3_5`` (a ``Qwen3_5Model``): ``language_model.*``, ``visual.*`` and ``custom_text_proj.*`` at the top
level, the config naming ``ColQwen3_5`` with its head's size as ``dim``, as the VultronRetriever checkpoints
are published (vLLM's ColQwen3.5 loader reads those names).

The vocabulary is Qwen2's with Qwen3-VL's added tokens at their ids (the pinned llama.cpp ships no Qwen3.5
vocabulary to rebuild one from), and the config names those ids for the image and vision markers, so the
prompts are the real ones token for token but for the ids. The image processor is Qwen3-VL's (Qwen3.5 shares
it) with docvec's ColQwen3.5 profile's bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .._errors import ConfigError
from .._model._profiles import COLQWEN3_5
from ._qwen_tokenizer import ID_ENDOFTEXT, ID_IM_END, QWEN3VL_ADDED_TOKENS, VOCAB_SIZE
from ._random_weights import TensorSpec, tensor_specs
from ._tiny_qwen3vl import qwen3vl_preprocessor

__all__ = ["COLQWEN3_5_DIM", "ColQwen35Geometry"]

#: the size of the VultronRetriever models' token vectors (their config's ``dim``; colpali-engine's
#: ``ColQwen3_5`` reads it, 128 when absent)
COLQWEN3_5_DIM = 320


@dataclass(frozen=True)
class ColQwen35Geometry:
    """The widths of a ColQwen3.5; everything else (vocabulary, special ids, image unit) is as described in
    the module's docstring."""

    label: ClassVar[str] = "ColQwen3.5"
    added_tokens: ClassVar[tuple[tuple[str, bool], ...]] = QWEN3VL_ADDED_TOKENS
    processor_class: ClassVar[str] = "Qwen3VLProcessor"

    text_hidden: int
    #: one letter per language-model layer: ``l`` a linear-attention (Gated-DeltaNet) layer, ``f`` full
    #: attention (Qwen3.5 has three of the first to one of the second)
    layers: str
    text_heads: int
    text_kv_heads: int
    text_intermediate: int
    linear_key_heads: int
    linear_value_heads: int
    linear_head_dim: int
    vision_depth: int
    vision_hidden: int
    vision_heads: int
    vision_intermediate: int
    vision_positions: int
    head_dim: int = 256
    #: Qwen3.5 rotates a quarter of each head's dimensions; M-RoPE's sections must sum to half of those
    partial_rotary_factor: float = 0.25
    mrope_section: tuple[int, int, int] = (11, 11, 10)
    dim: int = COLQWEN3_5_DIM
    patch_size: int = 16
    spatial_merge_size: int = 2
    temporal_patch_size: int = 2
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10_000_000.0
    max_position_embeddings: int = 262_144

    def __post_init__(self) -> None:
        if set(self.layers) - {"l", "f"} or "f" not in self.layers:
            raise ConfigError(
                f"layers {self.layers!r}: 'l' (linear) or 'f' (full attention) each, one 'f' at least"
            )
        rotary = int(self.head_dim * self.partial_rotary_factor)
        if sum(self.mrope_section) * 2 != rotary:
            raise ConfigError(
                f"mrope_section {self.mrope_section} must sum to half the rotary dims, {rotary // 2}"
            )
        if self.text_heads % self.text_kv_heads or self.linear_value_heads % self.linear_key_heads:
            raise ConfigError("heads must be a multiple of KV heads, linear value heads of linear key heads")
        if round(self.vision_positions**0.5) ** 2 != self.vision_positions:
            raise ConfigError(f"vision_positions {self.vision_positions} is not a square grid")

    @classmethod
    def tiny(cls) -> ColQwen35Geometry:
        """A model small enough to build and run in seconds, with both kinds of layers and the real
        partial rotary embedding (the paths llama.cpp's ``qwen35`` graph takes)."""
        return cls(
            text_hidden=64,
            layers="lllf",
            text_heads=2,
            text_kv_heads=1,
            text_intermediate=128,
            linear_key_heads=2,
            linear_value_heads=4,
            linear_head_dim=32,
            vision_depth=2,
            vision_hidden=32,
            vision_heads=2,
            vision_intermediate=64,
            vision_positions=256,
            head_dim=32,
            mrope_section=(2, 1, 1),
        )

    @classmethod
    def flash(cls) -> ColQwen35Geometry:
        """VultronRetriever Flash's geometry: Qwen3.5-0.8B (its config.json; 0.85 B parameters with the
        head, as MTEB lists it)."""
        return cls(
            text_hidden=1024,
            layers="lllf" * 6,
            text_heads=8,
            text_kv_heads=2,
            text_intermediate=3584,
            linear_key_heads=16,
            linear_value_heads=16,
            linear_head_dim=128,
            vision_depth=12,
            vision_hidden=768,
            vision_heads=12,
            vision_intermediate=3072,
            vision_positions=2304,
        )

    def hf_config(self, dtype: str = "float32") -> dict[str, Any]:
        """The ``Qwen3_5Config`` keyword arguments, naming ``ColQwen3_5`` and its ``dim``."""
        kinds = {"l": "linear_attention", "f": "full_attention"}
        return {
            "architectures": ["ColQwen3_5"],
            "dim": self.dim,
            "text_config": {
                "vocab_size": VOCAB_SIZE,
                "hidden_size": self.text_hidden,
                "intermediate_size": self.text_intermediate,
                "num_hidden_layers": len(self.layers),
                "layer_types": [kinds[k] for k in self.layers],
                "num_attention_heads": self.text_heads,
                "num_key_value_heads": self.text_kv_heads,
                "head_dim": self.head_dim,
                "linear_conv_kernel_dim": 4,
                "linear_key_head_dim": self.linear_head_dim,
                "linear_value_head_dim": self.linear_head_dim,
                "linear_num_key_heads": self.linear_key_heads,
                "linear_num_value_heads": self.linear_value_heads,
                "hidden_act": "silu",
                "attention_bias": False,
                "max_position_embeddings": self.max_position_embeddings,
                "rms_norm_eps": self.rms_norm_eps,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": self.rope_theta,
                    "partial_rotary_factor": self.partial_rotary_factor,
                    "mrope_section": list(self.mrope_section),
                    "mrope_interleaved": True,
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
                "hidden_act": "gelu_pytorch_tanh",
                "in_channels": 3,
                "out_hidden_size": self.text_hidden,
                "patch_size": self.patch_size,
                "spatial_merge_size": self.spatial_merge_size,
                "temporal_patch_size": self.temporal_patch_size,
                "num_position_embeddings": self.vision_positions,
            },
            "image_token_id": 151655,
            "video_token_id": 151656,
            "vision_start_token_id": 151652,
            "vision_end_token_id": 151653,
            "tie_word_embeddings": True,
            "dtype": dtype,
        }

    def transformers_config(self, dtype: str = "float32") -> Any:
        """The ``Qwen3_5Config`` of :meth:`hf_config`."""
        from transformers import Qwen3_5Config

        return Qwen3_5Config(**self.hf_config(dtype))

    def stored_tensors(self, config: Any) -> list[TensorSpec]:
        """Every stored tensor, as colpali-engine saves a ``ColQwen3_5`` (``language_model.*``,
        ``visual.*``, ``custom_text_proj.*``)."""
        import torch
        from transformers import Qwen3_5Model

        with torch.device("meta"):
            model = Qwen3_5Model(config)
        return [
            *tensor_specs(model),
            TensorSpec("custom_text_proj.weight", (self.dim, self.text_hidden), "weight"),
            TensorSpec("custom_text_proj.bias", (self.dim,), "bias"),
        ]

    def preprocessor_config(self) -> dict[str, Any]:
        """Qwen3-VL's processor (Qwen3.5's) with the ColQwen3.5 profile's pixel bounds."""
        return qwen3vl_preprocessor(self, COLQWEN3_5.min_pixels, COLQWEN3_5.max_pixels)
