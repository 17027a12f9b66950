"""Model profiles: what an embedding model needs from the generic path (prompts, pooling, sizes, image
bounds). The embedder knows no model names; adding a model is adding a profile here.

Settings may override a profile's sizes and image bounds; :meth:`ModelProfile.resolve` checks the
overrides against the model and fills in what was left unset.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._config import EmbedSettings
from .._errors import ConfigError, ModelMismatchError

__all__ = ["JINA_V4", "PROFILES", "ImageBounds", "ModelProfile", "profile_for"]


@dataclass(frozen=True)
class ImageBounds:
    """How images are resized for a model: area bounds after resizing, the token unit, the aspect limit."""

    min_pixels: int
    max_pixels: int
    unit: int  # pixels per side covered by one image token (patch x spatial merge)
    max_aspect: float  # longer side over shorter side, at most


@dataclass(frozen=True)
class ModelProfile:
    """How one embedding model turns queries, passages and images into single vectors."""

    name: str
    architectures: tuple[str, ...]  # GGUF ``general.architecture`` values of its language model
    projectors: tuple[str, ...]  # ``clip.projector_type`` values of its vision encoder
    query_template: str
    passage_template: str
    image_template: str  # ``{marker}`` stands where the image goes
    image_span: tuple[str, str]  # tokens that open and close the pooled image span, both included
    image_unit: int  # pixels per side covered by one image token (patch x spatial merge)
    #: the sizes a vector may be truncated to (Matryoshka), as fractions of the model's width: the full
    #: size is always one. A model of the same architecture and another width (the tiny test model, 64
    #: wide) offers the same fractions of its own width.
    matryoshka: tuple[float, ...]
    min_pixels: int  # the model's image area bounds after resizing (its processor's defaults)
    max_pixels: int
    max_aspect: float  # its image processor refuses longer-to-shorter side ratios above this
    licence: str

    def dims(self, width: int) -> tuple[int, ...]:
        """The vector sizes a model of this profile with ``width``-wide hidden states gives, smallest first
        (the last is ``width``, the full size)."""
        sizes = {width} | {
            int(width * f) for f in self.matryoshka if (width * f).is_integer() and width * f >= 1
        }
        return tuple(sorted(sizes))

    def check_dim(self, dim: int, width: int) -> int:
        """``dim`` if a model of this profile, ``width`` wide, gives vectors of that size, else
        :class:`ConfigError` naming the sizes it gives."""
        sizes = self.dims(width)
        if dim not in sizes:
            shown = ", ".join(map(str, sizes))
            model = f"this model ({self.name}, {width} wide)"
            raise ConfigError(f"dim must be one of {shown} for {model}, not {dim}")
        return dim

    def resolve(self, settings: EmbedSettings, width: int) -> tuple[int, ImageBounds]:
        """The vector size and image bounds ``settings`` ask for, checked against this model (``width``
        wide): unset values are the model's (the full width); a size it was not trained for, or an image
        area under one token, is a :class:`ConfigError`."""
        dim = self.check_dim(settings.dim if settings.dim is not None else width, width)
        low = settings.min_pixels if settings.min_pixels is not None else self.min_pixels
        high = settings.max_pixels if settings.max_pixels is not None else self.max_pixels
        token = self.image_unit**2
        if low < token or high < token:
            side = self.image_unit
            raise ConfigError(
                f"min_pixels and max_pixels must be at least {token} (one {side}x{side} image token of "
                f"{self.name}), not {low} and {high}"
            )
        if low > high:
            raise ConfigError(f"min_pixels ({low}) is larger than max_pixels ({high})")
        return dim, ImageBounds(low, high, self.image_unit, self.max_aspect)


JINA_V4 = ModelProfile(
    name="jina-embeddings-v4",
    architectures=("qwen2vl",),
    projectors=("qwen2.5vl_merger",),
    query_template="Query: {text}",
    passage_template="Passage: {text}",
    # mtmd inserts <|vision_start|> and <|vision_end|> around the marker itself.
    image_template="<|im_start|>user\n{marker}Describe the image.<|im_end|>\n",
    image_span=("<|vision_start|>", "<|vision_end|>"),
    image_unit=28,
    # 2048 numbers, truncatable to 1024, 512, 256 or 128 (the model card's Matryoshka sizes)
    matryoshka=(1 / 16, 1 / 8, 1 / 4, 1 / 2),
    # Qwen2.5-VL's processor as jina-embeddings-v4 configures it: 4 to 768 image tokens of 28x28 pixels.
    min_pixels=4 * 28 * 28,
    max_pixels=768 * 28 * 28,
    max_aspect=200.0,
    licence="CC-BY-NC-4.0",
)

#: every model docvec knows
PROFILES = (JINA_V4,)


def profile_for(architecture: str, projector: str) -> ModelProfile:
    """The profile serving a language model of ``architecture`` with a vision encoder of ``projector``."""
    for p in PROFILES:
        if architecture in p.architectures and projector in p.projectors:
            return p
    raise ModelMismatchError(
        f"no embedding profile for a '{architecture}' language model with a '{projector}' vision encoder; "
        f"supported: "
        + "; ".join(f"{p.name} ({'/'.join(p.architectures)} + {'/'.join(p.projectors)})" for p in PROFILES)
    )
