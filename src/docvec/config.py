"""Settings: one model, read once at the edge (CLI, API lifespan, flow entry) and passed down.

Values come from arguments, then ``DOCVEC_*`` environment variables, then a ``.env`` file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["EMBED_DIMS", "EmbedSettings", "RenderSettings", "Settings"]

#: Matryoshka sizes jina-embeddings-v4 was trained for.
EMBED_DIMS: tuple[int, ...] = (128, 256, 512, 1024, 2048)


def _default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "docvec"


def _default_cache_dir() -> Path:
    return Path.home() / ".cache" / "docvec"


class EmbedSettings(BaseSettings):
    """How the embedder runs. Nested under :class:`Settings` as ``DOCVEC_EMBED__*``."""

    model_config = SettingsConfigDict(extra="forbid")

    dim: int = Field(2048, description="Output size: 2048, or a Matryoshka truncation to 128..1024.")
    threads: int | None = Field(None, ge=1, description="CPU threads; default: all cores.")
    gpu_layers: int = Field(0, ge=-1, description="Language-model layers offloaded to a GPU (-1: all).")
    vision_gpu: bool = Field(False, description="Run the vision encoder (mmproj) on the GPU.")
    min_pixels: int = Field(3136, ge=784, description="Smallest image area after resizing (28x28 units).")
    max_pixels: int = Field(602112, ge=784, description="Largest image area after resizing (768 tokens).")
    decode_batch: int = Field(
        256, ge=1, le=8192, description="Tokens decoded per llama.cpp call; bounds memory for large images."
    )
    max_text_tokens: int = Field(8192, ge=16, description="Longer texts are truncated (with a warning).")

    @field_validator("dim")
    @classmethod
    def _dim_is_matryoshka(cls, v: int) -> int:
        if v not in EMBED_DIMS:
            raise ValueError(f"dim must be one of {', '.join(map(str, EMBED_DIMS))}, not {v}")
        return v

    @model_validator(mode="after")
    def _pixels_ordered(self) -> EmbedSettings:
        if self.min_pixels > self.max_pixels:
            raise ValueError(f"min_pixels ({self.min_pixels}) is larger than max_pixels ({self.max_pixels})")
        return self


class RenderSettings(BaseSettings):
    """How documents become page images. Nested under :class:`Settings` as ``DOCVEC_RENDER__*``."""

    model_config = SettingsConfigDict(extra="forbid")

    workers: int = Field(1, ge=1, le=64, description="Rendering processes (PDFium is not thread-safe).")
    timeout_s: float = Field(300.0, gt=0, description="Time limit for rendering one document.")


class Settings(BaseSettings):
    """All of docvec's settings."""

    model_config = SettingsConfigDict(
        env_prefix="DOCVEC_",
        env_file=".env",
        env_file_encoding="utf-8",
        env_nested_delimiter="__",
        extra="ignore",
    )

    data_dir: Path = Field(default_factory=_default_data_dir, description="Where docvec keeps its data.")
    cache_dir: Path = Field(
        default_factory=_default_cache_dir,
        description="Downloads and build outputs: the llama-cpp-python source, built wheels, test models.",
    )
    model: str = Field(
        "jina-v4",
        description="A model folder, a 'LM.gguf,MMPROJ.gguf' pair, or a registry name (see `docvec models`).",
    )
    collection: str = Field("docvec", description="The Qdrant collection pages are indexed into.")
    qdrant_url: str | None = Field(
        None, description="A Qdrant server or cluster; unset: the embedded store under data_dir/qdrant."
    )
    qdrant_api_key: str | None = Field(None, description="API key of the Qdrant server.")
    api_key: str | None = Field(None, description="When set, the REST API asks for it (X-API-Key header).")
    max_upload_mb: int = Field(50, ge=1, description="Largest document `POST /documents` accepts, in MB.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    render: RenderSettings = Field(default_factory=RenderSettings)
