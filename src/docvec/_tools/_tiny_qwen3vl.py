"""Qwen3-VL-Embedding as :func:`~._tiny_checkpoint.build_checkpoint` writes it.

The second family's offline test model: the same code paths as Qwen3-VL-Embedding (the converter's
``qwen3vl`` language model with deepstack and its ``qwen3vl_merger`` vision encoder, llama.cpp's graphs,
the transformers reference) without a download. Qwen3-VL-Embedding is a Qwen3-VL whose output is the last
hidden state (its ``Qwen3VLForEmbedding`` wraps ``Qwen3VLModel`` as ``model``, without a language-model
head): the checkpoint stores ``model.language_model.*`` and ``model.visual.*`` as transformers saves
Qwen3-VL, with tied embeddings (as the 2B has), and says ``Qwen3VLForConditionalGeneration``, which
transformers loads and llama.cpp's converter takes.

The tokenizer has Qwen3-VL's added tokens at their real ids. The image processor is Qwen3-VL's: patch 16,
spatial merge 2 (one token per 32x32 pixels), mean and std 0.5, and Qwen3-VL-Embedding's pixel bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .._errors import ConfigError
from .._model._profiles import COLQWEN3, QWEN3_VL_EMBEDDING
from ._qwen_tokenizer import ID_ENDOFTEXT, ID_IM_END, QWEN3VL_ADDED_TOKENS, VOCAB_SIZE
from ._random_weights import TensorSpec, tensor_specs

__all__ = [
    "COLQWEN3_DIM",
    "COLQWEN3_HEAD",
    "IMAGE_MEAN",
    "IMAGE_STD",
    "ColQwen3Geometry",
    "Qwen3VLGeometry",
    "qwen3vl_preprocessor",
]

#: Qwen3-VL's image normalisation (its preprocessor_config.json)
IMAGE_MEAN = (0.5, 0.5, 0.5)
IMAGE_STD = (0.5, 0.5, 0.5)


@dataclass(frozen=True)
class Qwen3VLGeometry:
    """The widths of a Qwen3-VL model; everything else (vocabulary, special ids, image unit) is the real
    one."""

    label: ClassVar[str] = "Qwen3-VL-Embedding"
    added_tokens: ClassVar[tuple[tuple[str, bool], ...]] = QWEN3VL_ADDED_TOKENS
    processor_class: ClassVar[str] = "Qwen3VLProcessor"

    text_hidden: int
    text_layers: int
    text_heads: int
    text_kv_heads: int
    text_intermediate: int
    vision_depth: int
    vision_hidden: int
    vision_heads: int
    vision_intermediate: int
    #: the vision layers whose outputs are merged into the first language-model layers (deepstack)
    deepstack: tuple[int, ...]
    #: learned position embeddings of the vision encoder (a square grid, interpolated to each image)
    vision_positions: int = 2304
    head_dim: int = 128
    mrope_section: tuple[int, int, int] = (24, 20, 20)
    patch_size: int = 16
    spatial_merge_size: int = 2
    temporal_patch_size: int = 2
    rms_norm_eps: float = 1e-6
    rope_theta: float = 5_000_000.0
    max_position_embeddings: int = 262_144

    def __post_init__(self) -> None:
        if self.text_heads % self.text_kv_heads:
            raise ConfigError(
                f"text: {self.text_heads} heads are not a multiple of {self.text_kv_heads} KV heads"
            )
        if sum(self.mrope_section) * 2 != self.head_dim:
            raise ConfigError(
                f"mrope_section {self.mrope_section} must sum to head_dim / 2 = {self.head_dim // 2}"
            )
        if self.vision_hidden % self.vision_heads:
            raise ConfigError(
                f"vision: hidden {self.vision_hidden} is not a multiple of {self.vision_heads} heads"
            )
        if not self.deepstack or any(not 0 <= i < self.vision_depth for i in self.deepstack):
            raise ConfigError(
                f"deepstack layers {self.deepstack} must be non-empty and below {self.vision_depth}"
            )
        # llama.cpp's qwen3vl graph adds deepstack level i to the output of language-model layer i
        if len(self.deepstack) >= self.text_layers:
            raise ConfigError(
                f"{len(self.deepstack)} deepstack levels need more than {self.text_layers} language-model "
                "layers"
            )
        if round(self.vision_positions**0.5) ** 2 != self.vision_positions:
            raise ConfigError(f"vision_positions {self.vision_positions} is not a square grid")

    @classmethod
    def tiny(cls) -> Qwen3VLGeometry:
        """A model small enough to build and run in seconds (~10 M parameters, most in the embedding); the
        real head_dim (128), M-RoPE sections and deepstack, which the graphs' code paths depend on."""
        return cls(*_GEOMETRIES["tiny"])

    @classmethod
    def qwen3vl_2b(cls) -> Qwen3VLGeometry:
        """Qwen3-VL-2B (Qwen3-VL-Embedding-2B's backbone; 2.1 B parameters)."""
        return cls(*_GEOMETRIES["qwen3-vl-2b"])

    @classmethod
    def qwen3vl_4b(cls) -> Qwen3VLGeometry:
        """Qwen3-VL-4B (the tomoro-colqwen3-embed-4b's backbone)."""
        return cls(*_GEOMETRIES["qwen3-vl-4b"])

    @classmethod
    def qwen3vl_8b(cls) -> Qwen3VLGeometry:
        """Qwen3-VL-8B (Qwen3-VL-Embedding-8B's backbone)."""
        return cls(*_GEOMETRIES["qwen3-vl-8b"])

    def hf_config(self, dtype: str = "float32") -> dict[str, Any]:
        """The ``Qwen3VLConfig`` keyword arguments for this geometry (real token ids, tied embeddings)."""
        return {
            "architectures": ["Qwen3VLForConditionalGeneration"],
            "text_config": {
                "vocab_size": VOCAB_SIZE,
                "hidden_size": self.text_hidden,
                "intermediate_size": self.text_intermediate,
                "num_hidden_layers": self.text_layers,
                "num_attention_heads": self.text_heads,
                "num_key_value_heads": self.text_kv_heads,
                "head_dim": self.head_dim,
                "hidden_act": "silu",
                "attention_bias": False,
                "max_position_embeddings": self.max_position_embeddings,
                "rms_norm_eps": self.rms_norm_eps,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": self.rope_theta,
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
                "deepstack_visual_indexes": list(self.deepstack),
            },
            "image_token_id": 151655,
            "video_token_id": 151656,
            "vision_start_token_id": 151652,
            "vision_end_token_id": 151653,
            "tie_word_embeddings": True,
            "dtype": dtype,
        }

    def transformers_config(self, dtype: str = "float32") -> Any:
        """The ``Qwen3VLConfig`` of :meth:`hf_config`."""
        from transformers import Qwen3VLConfig

        return Qwen3VLConfig(**self.hf_config(dtype))

    def stored_tensors(self, config: Any) -> list[TensorSpec]:
        """Every stored tensor, under transformers' module names for Qwen3-VL (``model.language_model.*``,
        ``model.visual.*``, as Qwen3-VL-Embedding is saved); the tied lm_head is not stored."""
        import torch
        from transformers import Qwen3VLForConditionalGeneration

        with torch.device("meta"):
            model = Qwen3VLForConditionalGeneration(config)
        return list(tensor_specs(model))

    def preprocessor_config(self) -> dict[str, Any]:
        """Qwen3-VL's processor with the pixel bounds Qwen3-VL-Embedding's code resizes within."""
        return qwen3vl_preprocessor(self, QWEN3_VL_EMBEDDING.min_pixels, QWEN3_VL_EMBEDDING.max_pixels)


def qwen3vl_preprocessor(geometry: Any, low: int, high: int) -> dict[str, Any]:
    """preprocessor_config.json of Qwen3-VL's image processor (Qwen3.5 uses it too) for a ``geometry``
    (its patch, merge and temporal patch sizes, its processor class), resizing within ``low``..``high``
    pixels."""
    return {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(IMAGE_MEAN),
        "image_processor_type": "Qwen2VLImageProcessor",
        "image_std": list(IMAGE_STD),
        "merge_size": geometry.spatial_merge_size,
        "patch_size": geometry.patch_size,
        "processor_class": geometry.processor_class,
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"longest_edge": high, "shortest_edge": low},
        "temporal_patch_size": geometry.temporal_patch_size,
    }


# The geometries docvec builds, one Qwen3VLGeometry each: its first fields, in order. The 2B and 8B are
# Qwen3-VL-2B/8B-Instruct's config.json (the embedding models' backbones); the 4B Qwen3-VL-4B-Instruct's
# (Qwen3-4B's text sizes and the 2B's vision tower; not read from the file here).
# fmt: off
_GEOMETRIES: dict[str, tuple[Any, ...]] = {
    #               text ---------------------------------- vision ---------------------------------------
    #               hidden layers heads kv  inter   depth hidden heads inter deepstack    positions
    "tiny":        (64,    4,     2,    1,  128,    5,    64,    4,    128,  (1, 2, 3),   256),
    "qwen3-vl-2b": (2048,  28,    16,   8,  6144,   24,   1024,  16,   4096, (5, 11, 17), 2304),
    "qwen3-vl-4b": (2560,  36,    32,   8,  9728,   24,   1024,  16,   4096, (5, 11, 17), 2304),
    "qwen3-vl-8b": (4096,  36,    32,   8,  12288,  27,   1152,  16,   4304, (8, 16, 24), 2304),
}
# fmt: on


#: the size of ColQwen3's token vectors (colpali-engine's ``ColQwen3.dim``: its ``custom_text_proj`` is
#: ``nn.Linear(hidden_size, 320)`` whatever the width)
COLQWEN3_DIM = 320
#: ColQwen3's late-interaction head, as colpali-engine names the module (top level, beside the Qwen3-VL
#: weights)
COLQWEN3_HEAD = "custom_text_proj"


@dataclass(frozen=True)
class ColQwen3Geometry(Qwen3VLGeometry):
    """A ColQwen3 (colpali-engine's ``ColQwen3``: a ``Qwen3VLModel`` whose every token's last hidden state
    goes through ``custom_text_proj`` and is L2-normalised): Qwen3-VL's weights as :class:`Qwen3VLGeometry`
    stores them, and the head, ``custom_text_proj.weight`` [320, text hidden] and ``.bias`` [320],
    initialised like the other linear layers. The config names ``ColQwen3``, as a checkpoint colpali-engine
    saves does; colpali-engine loads it, renaming ``model.*`` as its ``_checkpoint_conversion_mapping``
    says."""

    label: ClassVar[str] = "ColQwen3"

    def hf_config(self, dtype: str = "float32") -> dict[str, Any]:
        """:class:`Qwen3VLGeometry`'s config, naming ``ColQwen3``."""
        return super().hf_config(dtype) | {"architectures": ["ColQwen3"]}

    def preprocessor_config(self) -> dict[str, Any]:
        """Qwen3-VL's processor with the pixel bounds of docvec's ColQwen3 profile (a ColQwen3 checkpoint
        keeps Qwen3-VL's processor; its card's token budget is the profile's ``max_pixels``)."""
        return qwen3vl_preprocessor(self, COLQWEN3.min_pixels, COLQWEN3.max_pixels)

    def stored_tensors(self, config: Any) -> list[TensorSpec]:
        """Qwen3-VL's tensors and the head's."""
        return [
            *super().stored_tensors(config),
            TensorSpec(f"{COLQWEN3_HEAD}.weight", (COLQWEN3_DIM, self.text_hidden), "weight"),
            TensorSpec(f"{COLQWEN3_HEAD}.bias", (COLQWEN3_DIM,), "bias"),
        ]
