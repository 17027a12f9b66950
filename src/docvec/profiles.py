"""Model profiles: what an embedding model needs from the generic path (prompts, pooling, sizes).

The embedder knows no model names; adding a model is adding a profile here.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ModelMismatchError

__all__ = ["JINA_V4", "ModelProfile", "profile_for"]


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
    dims: tuple[int, ...]  # sizes a vector may be truncated to (Matryoshka)
    licence: str


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
    dims=(128, 256, 512, 1024, 2048),
    licence="CC-BY-NC-4.0",
)

_PROFILES = (JINA_V4,)


def profile_for(architecture: str, projector: str) -> ModelProfile:
    """The profile serving a language model of ``architecture`` with a vision encoder of ``projector``."""
    for p in _PROFILES:
        if architecture in p.architectures and projector in p.projectors:
            return p
    raise ModelMismatchError(
        f"no embedding profile for a '{architecture}' language model with a '{projector}' vision encoder; "
        f"supported: "
        + "; ".join(f"{p.name} ({'/'.join(p.architectures)} + {'/'.join(p.projectors)})" for p in _PROFILES)
    )
